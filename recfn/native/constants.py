"""The constants recfn's C extensions and its Python modules share: this file is their one
source. setup.py writes them into ``recfn_constants.h`` (a build product, never committed),
which the C files include, and the Python modules import them from here, so C and Python
cannot disagree. Only integer constants, each a literal expression, belong here (typed for mypyc where the
compiled code wants a fixed width)."""

from __future__ import annotations

from typing import Final

from mypy_extensions import i32, i64

# A recorder's gate: an int64 vector that C and compiled Python both update.
GATE_EVENTS: Final = 0  # events recorded
GATE_DROPPED: Final = 1  # events dropped past max_events
GATE_STOPPED: Final = 2  # 1 once the recorder stopped
GATE_EPOCH: Final = 3  # changes whenever a recorded range starts or ends
GATE_SIZE: Final = 4

# The profiler's rows: chunks of 1 << CHUNK_SHIFT rows that never move.
CHUNK_SHIFT: Final = 14
CHUNK_ROWS: Final[i64] = 1 << 14
ESCAPED: Final[i32] = -1  # a gap or span too large for int32, kept in a chunk's side vectors
ESCAPE_LIMIT: Final[i64] = (1 << 31) - 1

# A row's packed meta (int32): scope | kind << META_KIND_SHIFT | async bit | depth <<
# META_DEPTH_SHIFT; META_LOW: the scope, kind and async bits.
META_SCOPE_MASK: Final[i32] = (1 << 4) - 1
META_KIND_SHIFT: Final = 4
META_KIND_MASK: Final[i32] = (1 << 2) - 1  # after shifting by META_KIND_SHIFT
META_ASYNC_BIT: Final[i32] = 1 << 6
META_LOW: Final[i32] = (1 << 7) - 1
META_DEPTH_SHIFT: Final = 8

# A thread's row arguments (int64): the slot where the fast path learns an event loop runs (1),
# and that the task stack last claimed on the thread is private to the running context (2).
ROW_ARGS_LOOP: Final = 3

# trace_calls' name ids that are not names.
NAME_EXCLUDED: Final[i32] = -1  # the code is filtered out
NAME_NOT_NOW: Final[i32] = -2  # the recorder's name lock is held: skip this event

# trace_calls' code info (Tracer.code_name): the name id in the low 32 bits (NAME_EXCLUDED as
# its unsigned 32 bits), above it whose code it is, and for library code its package's number.
# A negative info is NAME_NOT_NOW.
CODE_USER: Final[i64] = 0  # not the standard library, an installed package or recfn
CODE_LIBRARY: Final[i64] = 1
CODE_RECFN: Final[i64] = 2  # recfn itself: never recorded, and its library callees never hidden
CODE_KIND_SHIFT: Final = 32
CODE_KIND_MASK: Final[i64] = 3
CODE_PACKAGE_SHIFT: Final = 34
# Chrome times (microseconds): below this magnitude the decoders read a time's nanoseconds from
# its nearest double (less than 1 ns apart there), from it on from its digits (chrome._times).
CHROME_EXACT_US: Final = 1 << 43
