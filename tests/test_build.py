"""The build under test is the one CI asked for: compiled (.so) or pure Python (.py)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys

import pytest

import recfn

CORE = [importlib.import_module(name) for name in recfn.COMPILED_MODULES]

EXPECT = os.environ.get("RECFN_EXPECT", "")


@pytest.mark.skipif(EXPECT != "compiled", reason="RECFN_EXPECT=compiled not set")
def test_core_modules_are_compiled_extensions() -> None:
    info = recfn.build_info()  # the one answer; the checks below look behind it
    assert info.compiled, str(info)
    assert set(info.modules.values()) == {"compiled"}, str(info)
    assert set(info.extensions.values()) == {"loaded"}, str(info)
    # the call protocol's glue installed: a compiled build without it warns, and CI fails here
    assert info.glue == {"call protocol": "installed"}, str(info)
    for module in CORE + [importlib.import_module(name) for name in recfn.NATIVE_MODULES]:
        assert module.__file__ is not None and module.__file__.endswith(".so"), module.__file__
    from recfn import native
    from recfn.capture import _tracer
    from recfn.engine import ranges
    from recfn.formats.chrome import _reader as chrome_reader

    assert _tracer.native_available()  # trace_calls runs on the C hook
    assert ranges._crange is not None  # the profiler's rows and the range fast path are native
    # ranges in an event loop push onto their task's stack in place, without a ContextVar write
    assert ranges._private_value is not None and ranges._current_context is not None
    # record_function("x") is made without an argument tuple, its __enter__/__exit__ bound from
    # a free list, and decorated plain callables run without a Python frame (recfn.native._ccall)
    assert ranges.NATIVE_CALLS
    assert type(recfn.record_function("x")(run_python)) is ranges._ccall.RangeCall
    assert type(recfn.record_function("x")(len)) is not ranges._ccall.RangeCall  # no __code__
    assert chrome_reader.NATIVE is not None  # read_chrome_trace decodes with recfn.native._cchrome
    assert native.extension("_csummary") is not None  # out-of-core summaries in one native pass


@pytest.mark.skipif(EXPECT != "pure", reason="RECFN_EXPECT=pure not set")
def test_core_modules_are_pure_python() -> None:
    info = recfn.build_info()
    assert not info.compiled and info.mypyc is None, str(info)
    assert set(info.modules.values()) == {"interpreted"}, str(info)
    assert set(info.extensions.values()) == {"not built"}, str(info)
    for module in CORE:
        assert module.__file__ is not None and module.__file__.endswith(".py"), module.__file__
    for name in recfn.NATIVE_MODULES:  # no C extension either: trace_calls uses the Python tracer
        assert importlib.util.find_spec(name) is None, name


def test_compiled_flag_matches_loaded_modules() -> None:
    loaded_so = all(str(m.__file__).endswith(".so") for m in CORE)
    assert recfn.COMPILED is loaded_so


def test_import_stays_light() -> None:
    code = (
        "import sys, recfn; "
        "heavy = [m for m in ('pandas', 'matplotlib', 'IPython', 'pyarrow', 'torch') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def run_python(code: str, cwd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=120
    )


@pytest.fixture(scope="module")
def demo_parquet(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("imports")
    code = (
        "import recfn\n"
        "with recfn.profile() as prof, recfn.record_function('step'):\n"
        "    recfn.record_function('inner').__enter__().end()\n"
        "prof.save('demo.parquet')\n"
    )
    proc = run_python(code, str(folder))
    assert proc.returncode == 0, proc.stderr
    return str(folder)


@pytest.mark.parametrize(
    "frame",
    [
        "import recfn, pandas as pd\ndf = pd.read_parquet('demo.parquet')",
        "import pandas as pd, recfn\ndf = pd.read_parquet('demo.parquet')",
        "import recfn\ndf = recfn.load('demo.parquet', as_pandas=True)",
    ],
    ids=["recfn-then-pandas", "pandas-then-recfn", "recfn-load"],
)
def test_frames_get_the_accessor_whatever_the_import_order(frame: str, demo_parquet: str) -> None:
    """``df.recfn`` works once recfn is imported, before or after pandas; the accessor loads
    recfn.analysis (and matplotlib) only when first used."""
    code = (
        f"{frame}\nimport sys\n"
        "assert 'recfn.analysis' not in sys.modules and 'matplotlib' not in sys.modules\n"
        "print(df.recfn.summary()['count'].sum())\n"
    )
    proc = run_python(code, demo_parquet)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-1] == "2"


def test_summary_and_its_cli_draw_nothing_so_import_no_matplotlib(demo_parquet: str) -> None:
    """``df.recfn.summary()`` and ``recfn summary`` leave matplotlib unimported (it costs a
    quarter of a second): it is imported by the functions that draw."""
    code = (
        "import contextlib, io, sys\n"
        "from recfn.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()): assert main(['summary', 'demo.parquet']) == 0\n"
        "import recfn\n"
        "recfn.load('demo.parquet', as_pandas=True).recfn.summary()\n"
        "import recfn.analysis\n"
        "assert 'recfn.analysis.stats.summary' in sys.modules and 'matplotlib' not in sys.modules\n"
        "assert recfn.analysis.alt_text.__name__ == 'alt_text' and 'matplotlib' in sys.modules\n"
    )
    proc = run_python(code, demo_parquet)
    assert proc.returncode == 0, proc.stderr


def test_generic_top_level_names_are_not_installed(tmp_path: object) -> None:
    for name in ("analysis", "notebook_ext"):
        proc = run_python(f"import {name}", cwd=str(tmp_path))
        assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr, name
