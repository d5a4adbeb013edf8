"""Pictures of an event table (matplotlib): the timeline (``timeline``, one lane per thread,
``lanes``), the flame graph (``flame``) and what they share (``drawing``: colours, labels, alt
text). Importing these modules imports matplotlib."""
