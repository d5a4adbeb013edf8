"""Numbers from an event table: per-name summaries (``summary``), call trees and self time
(``tree``), the difference between two runs (``diff``) and per-rank views of a fleet
(``fleet``)."""
