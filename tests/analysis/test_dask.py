"""``ddf.recfn.summary()`` on a real 2-worker LocalCluster equals the pandas summary."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fleetdata import same, write_fleet

import recfn

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client() -> Iterator[object]:
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as connected,
    ):
        yield connected


def test_dask_summary_on_a_local_cluster_equals_pandas(client: object, tmp_path: Path) -> None:
    from recfn.analysis.outofcore.dask_accessor import read_dataset

    write_fleet(tmp_path, processes=4, ranges=500)
    expected = recfn.load(tmp_path, as_pandas=True).recfn.summary(by=["rank", "name"])
    ddf = dd.read_parquet(str(tmp_path), dtype_backend="numpy_nullable")
    assert ddf.npartitions == 4
    same(ddf.recfn.summary(by=["rank", "name"]), expected)
    same(read_dataset(tmp_path).recfn.summary(by=["rank", "name"], by_partition=True), expected)


def test_float_timestamps_and_groupings_without_name_are_refused(tmp_path: Path) -> None:
    write_fleet(tmp_path, processes=1, ranges=10)
    with pytest.raises(TypeError, match="dtype_backend"):
        dd.read_parquet(str(tmp_path)).recfn.summary()
    with pytest.raises(ValueError, match="groups by name"):
        dd.read_parquet(str(tmp_path), dtype_backend="numpy_nullable").recfn.summary(by="rank")
