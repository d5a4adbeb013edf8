"""Pictures of an event table: what a timeline shows (``chart``), drawn on a matplotlib Axes
(``timeline``, one lane per thread, ``lanes``) or straight into a PNG (``picture``: numpy and
Pillow, with the colours of ``colors`` and the ticks of ``ticks``, no matplotlib), and the
flame graph (``flame``); ``drawing`` holds the matplotlib parts they share (labels, alt text).
Importing ``timeline``, ``flame`` or ``drawing`` imports matplotlib."""
