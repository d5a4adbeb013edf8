"""A table's constant columns (pid, sequence_nr's -1, one thread's id) are mapped, not written,
from ``REPEATED_FROM`` bytes on (``recfn.native._crange.repeated``), and hold the same values as
written ones; nullable and boolean columns are packed by numpy with Arrow's meaning."""

from __future__ import annotations

import errno
import gc
import os
import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import recfn
from recfn import native
from recfn.capture import _table

crange: Any = native.extension("_crange")


def refused() -> str:
    """Why ``repeated`` cannot map here ("" where it can): the extension is not built, or the
    system refuses shared memory (``memfd_create`` under a sandbox's filter, say), where recfn
    writes the values instead."""
    if crange is None:
        return "recfn.native._crange is not built"
    try:
        crange.repeated(b"\x00", 1)
    except OSError as exc:
        return f"the system refuses the mapping ({exc})"
    return ""


needs_crange = pytest.mark.skipif(crange is None, reason="recfn.native._crange is not built")
WHY_NOT_MAPPED = refused()
needs_mapping = pytest.mark.skipif(bool(WHY_NOT_MAPPED), reason=WHY_NOT_MAPPED or "it maps")


@needs_mapping
@pytest.mark.parametrize(
    ("value", "width", "count"),
    [
        (-1, 8, 1),
        (12345, 8, 131_072),  # exactly one minimum piece
        (2**40 + 7, 8, 2_000_003),  # pieces and a partial last one
        (-7, 4, 300_001),
        (3, 2, 5),
        (-2, 1, 1 << 22),
    ],
)
def test_repeated_holds_the_value_everywhere(value: int, width: int, count: int) -> None:
    dtype = np.dtype(f"i{width}")
    buffer = crange.repeated(np.array(value, dtype).tobytes(), count * width)
    values = np.frombuffer(buffer, dtype)
    assert len(buffer) == count * width
    assert len(values) == count
    np.testing.assert_array_equal(values, np.full(count, value, dtype))


@needs_mapping
def test_repeated_is_read_only_and_lives_as_long_as_its_views() -> None:
    values = np.frombuffer(crange.repeated(np.int64(5).tobytes(), 8 << 20), np.int64)
    gc.collect()  # only the array holds the buffer now
    assert not values.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        values[0] = 1
    assert memoryview(values.base).readonly
    with pytest.raises(ValueError):
        values.setflags(write=True)
    assert int(values.sum()) == 5 * (1 << 20)


@needs_crange
@pytest.mark.parametrize(("value", "nbytes"), [(b"abc", 3), (b"", 8), (b"a", 0), (b"ab", 3)])
def test_repeated_refuses_widths_and_sizes_it_cannot_tile(value: bytes, nbytes: int) -> None:
    with pytest.raises(ValueError, match="1, 2, 4 or 8 bytes"):
        crange.repeated(value, nbytes)


@pytest.mark.parametrize("count", [0, 3, _table.REPEATED_FROM // 8 + 1])
def test_constants_equal_written_values_at_every_width(count: int) -> None:
    constant = _table._Constants(count)
    for value in (0, -1, 7, os.getpid()):
        for dtype in (np.int8, np.int32, np.int64):
            if not np.can_cast(np.min_scalar_type(value), dtype):
                continue
            column = constant(value, dtype)
            assert column.dtype == dtype
            np.testing.assert_array_equal(column, np.full(count, value, dtype))


def test_a_large_constant_column_is_mapped_where_the_extension_is_built() -> None:
    values = _table._repeated(9, _table.REPEATED_FROM // 8, 8)
    assert not values.flags.writeable
    if not WHY_NOT_MAPPED:
        assert type(values.base).__name__ == "Repeated"
    np.testing.assert_array_equal(values, np.full(len(values), 9, np.int64))


def ranges(count: int) -> None:
    for _ in range(count):
        with recfn.record_function("r"):
            pass


@pytest.mark.parametrize("threads", [1, 2])
def test_a_large_capture_has_its_pid_thread_and_sequence_columns(threads: int) -> None:
    count = _table.REPEATED_FROM // 8 + 10  # a mapped column from one thread's rows on
    with recfn.profile(max_events=threads * count + 10) as prof:
        workers = [threading.Thread(target=ranges, args=(count,)) for _ in range(threads - 1)]
        for worker in workers:
            worker.start()
        ranges(count)
        for worker in workers:
            worker.join()
    table = prof.trace.table
    names = table.column("name").to_pylist()
    assert names.count("r") == threads * count
    assert set(table.column("pid").to_pylist()) == {os.getpid()}
    assert set(table.column("sequence_nr").to_pylist()) == {-1}
    thread_ids = table.column("thread_id").to_numpy()
    assert len(set(thread_ids.tolist())) == threads
    assert (np.diff(thread_ids) != 0).sum() == threads - 1  # each thread's rows together


def test_nullable_marks_exactly_the_null_value() -> None:
    scratch = np.empty(11, np.bool_)
    values = np.array([0, 1, 2, 0, 4, 5, 6, 7, 8, 0, 10], np.int64)
    made = _table._nullable(values, 0, scratch)
    made.validate(full=True)
    assert made.equals(pa.array(values, mask=values == 0))
    assert made.null_count == 3
    whole = _table._nullable(values + 1, 0, scratch)
    assert whole.null_count == 0
    assert whole.equals(pa.array(values + 1))


@pytest.mark.parametrize("count", [0, 1, 8, 9, 1000])
def test_booleans_equal_arrows_conversion(count: int) -> None:
    values = np.arange(count) % 3 == 1
    made = _table._booleans(values)
    made.validate(full=True)
    assert made.equals(pa.array(values))


FALLBACK_CHECK = """
import os, resource
import numpy as np
from recfn import native
from recfn.capture import _table

crange = native.extension("_crange")
open_now = len(os.listdir("/proc/self/fd")) - 1  # less the listing's own
resource.setrlimit(resource.RLIMIT_NOFILE, (open_now, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
try:
    crange.repeated(b"\\x05", 1 << 20)
except OSError as exc:
    print("refused", exc.errno)
values = _table._repeated(5, _table.REPEATED_FROM, 1)
print("written", type(values.base).__name__, values.flags.writeable, bool((values == 5).all()))
"""


@needs_mapping
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open files in /proc")
def test_a_constant_column_is_written_where_the_system_refuses_the_mapping() -> None:
    # A process with no file descriptor left: memfd_create fails (EMFILE), a real refusal.
    done = subprocess.run(
        [sys.executable, "-c", FALLBACK_CHECK], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == [f"refused {errno.EMFILE}", "written NoneType False True"]
