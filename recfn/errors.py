"""recfn's exceptions."""


class TraceFormatError(ValueError):
    """A file or table that is not a readable recfn trace (foreign, truncated or too new)."""


class MissingColumnsError(AttributeError, ValueError):
    """The frame lacks columns that an operation needs.

    It subclasses both ``AttributeError`` (the pandas accessor convention) and ``ValueError``
    (bad input), so either ``except`` clause catches it.
    """
