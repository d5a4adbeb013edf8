"""Datasets of many processes: folders, globs and lists of trace files (`resolve`, `read`),
their footers, and `unfinished` (processes that stopped before writing all they recorded).
The stable public name of ``recfn.formats.dataset``, where it lives."""

from recfn.formats.dataset import *  # noqa: F403
from recfn.formats.dataset import __all__ as __all__
