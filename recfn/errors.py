"""recfn's exceptions."""


class TraceFormatError(ValueError):
    """A file or table that is not a readable recfn trace (foreign, truncated or too new)."""
