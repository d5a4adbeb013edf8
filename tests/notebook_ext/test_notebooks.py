"""The example notebooks, executed by a real Jupyter kernel (nbclient + ipykernel)."""

from __future__ import annotations

import base64
import importlib.util
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
ALL = sorted(path.name for path in NOTEBOOKS.glob("*.ipynb"))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def execute(name: str, workdir: Path, env: dict[str, str]) -> Any:
    """Run every cell of ``notebooks/name`` in a fresh kernel with ``workdir`` as its cwd."""
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
    )
    client.execute(
        env=env
    )  # raises CellExecutionError, with the cell and its traceback, on any error
    return notebook


def magic_cells(notebook: Any) -> list[Any]:
    return [cell for cell in notebook.cells if cell.cell_type == "code"
            and cell.source.startswith("%%record_function")]  # fmt: skip


def assert_magic_output(cell: Any) -> None:
    """The magic's display: an HTML header + summary table, and a PNG timeline."""
    displays = [out for out in cell.outputs if out.output_type == "display_data"]
    html = [out.data["text/html"] for out in displays if "text/html" in out.data]
    pngs = [out.data["image/png"] for out in displays if "image/png" in out.data]
    assert html and "<table" in html[0] and "recfn · " in html[0], cell.source
    assert pngs and base64.b64decode(pngs[0]).startswith(PNG_MAGIC), cell.source


def test_there_are_the_three_notebooks():
    assert ALL == ["analysis.ipynb", "pytorch.ipynb", "quickstart.ipynb"]


@pytest.mark.parametrize("name", ALL)
def test_notebooks_are_committed_without_outputs(name: str):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source


def test_quickstart(tmp_path: Path, checkout_env: dict[str, str]):
    notebook = execute("quickstart.ipynb", tmp_path, checkout_env)
    cells = magic_cells(notebook)
    assert len(cells) == 3
    for cell in cells:
        assert_magic_output(cell)
    plain = next(o.data["text/html"] for o in cells[0].outputs if "text/html" in o.get("data", {}))
    assert "your code&#x27;s calls and the library calls it makes" in plain  # the default
    assert "numpy" in plain  # no annotations, still a table
    assert (tmp_path / "baseline.parquet").is_file()


def test_analysis(tmp_path: Path, checkout_env: dict[str, str]):
    notebook = execute("analysis.ipynb", tmp_path, checkout_env)
    cells = magic_cells(notebook)
    assert len(cells) == 1
    assert_magic_output(cells[0])
    header = next(o.data["text/html"] for o in cells[0].outputs if "text/html" in o.get("data", {}))
    assert "4 threads" in header  # the cell's thread and three workers
    assert (tmp_path / "pipeline.folded").is_file()


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_pytorch(tmp_path: Path, checkout_env: dict[str, str]):
    notebook = execute("pytorch.ipynb", tmp_path, checkout_env)
    for cell in magic_cells(notebook):
        assert_magic_output(cell)
    assert (tmp_path / "torch_trace.json").is_file()
