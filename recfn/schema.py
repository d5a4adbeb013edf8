"""The event table's contract: columns, Arrow and pandas types, defaults, metadata keys, and
`validate` / `conform` / `to_pandas` (docs/schema.md). The stable public name of
``recfn.formats.schema``, where it lives."""

from recfn.formats.schema import *  # noqa: F403
from recfn.formats.schema import __all__ as __all__
