"""The interactive timeline: a level-of-detail engine over the event table (``lod``) and an
anywidget view that asks it for what its viewport shows (``TimelineWidget``)."""
