"""The table side of cuda=True, without a GPU: device times given to the table builder land on
their ranges (the GPU half is tests/gpu/test_cuda.py)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

import recfn
from recfn.capture._table import build_table
from recfn.formats.schema import column_type
from recfn.gpu import DeviceTimes


def test_device_columns_join_ranges_by_id() -> None:
    """The table side of cuda=True: GPU times land on their ranges; memory events keep their device."""
    with recfn.profile(profile_memory=True) as prof:
        with recfn.record_function("a"):
            recfn.report_memory_usage(64, "cpu")
        with recfn.record_function("b"):
            pass
    recorder = prof._recorder
    assert recorder is not None
    plain = prof.table
    ids = dict(zip(plain.column("name").to_pylist(), plain.column("id").to_pylist()))
    times = DeviceTimes(
        ids=np.array([ids["b"], ids["a"]], dtype=np.int64),
        start_ns=np.array([2_000, 1_000], dtype=np.int64),
        duration_ns=np.array([20, 10], dtype=np.int64),
        devices=["cuda:1", "cuda:0"],
    )
    table = build_table(recorder, start_ns=0, node_id=-1, config={}, wall_ns=0, device_times=times)
    rows = {
        name: (start, duration, device)
        for name, start, duration, device in zip(
            table.column("name").to_pylist(),
            table.column("device_start_ns").to_pylist(),
            table.column("device_duration_ns").to_pylist(),
            table.column("device").to_pylist(),
        )
    }
    assert rows["a"] == (1_000, 10, "cuda:0")
    assert rows["b"] == (2_000, 20, "cuda:1")
    assert rows["[memory]"] == (None, None, "cpu")
    assert rows["__start_profile"] == (None, None, None)
    assert table.schema.field("device_duration_ns").type == pa.int64()
    assert table.schema.field("device").type == column_type("device")  # int8 index, as documented
