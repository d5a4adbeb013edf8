"""recfn's version: one place, read by the facade and by what stamps files with it."""

__version__ = "0.1.0"
