"""RecordScope: the kind of code a range belongs to, so callbacks can filter by it."""

from __future__ import annotations

import enum
from typing import Final

from recfn.errors import RecfnValueError

# The scope numbers, defined once: compiled modules import these Final ints (mypyc inlines them),
# everything else uses RecordScope, whose values are these.
SCOPE_FUNCTION: Final = 0
SCOPE_BACKWARD_FUNCTION: Final = 1
SCOPE_USER: Final = 7
NUM_SCOPES: Final = 10


class RecordScope(enum.IntEnum):
    """Scopes of a range, as in PyTorch's ``at::RecordScope`` (values are stable)."""

    FUNCTION = SCOPE_FUNCTION
    BACKWARD_FUNCTION = SCOPE_BACKWARD_FUNCTION
    TORCHSCRIPT_FUNCTION = 2
    KERNEL_FUNCTION_DTYPE = 3
    CUSTOM_CLASS = 4
    BUILD_FEATURE = 5
    LITE_INTERPRETER = 6
    USER_SCOPE = SCOPE_USER
    STATIC_RUNTIME_OP = 8
    STATIC_RUNTIME_MODEL = 9

    @property
    def label(self) -> str:
        """The lower-case name used in event tables (``"user_scope"``)."""
        return self.name.lower()


SCOPE_LABELS = tuple(scope.label for scope in RecordScope)


def as_scope(value: object) -> RecordScope:
    """Coerce ``value`` (a RecordScope, its int value or its name) or raise a clear error."""
    if isinstance(value, RecordScope):
        return value
    if isinstance(value, str):
        try:
            return RecordScope[value.upper()]
        except KeyError:
            raise RecfnValueError(f"unknown RecordScope name {value!r}") from None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < NUM_SCOPES:
        return RecordScope(value)
    raise RecfnValueError(f"not a RecordScope: {value!r}")
