"""The build under test is the one CI asked for: compiled (.so) or pure Python (.py)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest

import recfn

CORE = [importlib.import_module(name) for name in recfn.COMPILED_MODULES]

EXPECT = os.environ.get("RECFN_EXPECT", "")


@pytest.mark.skipif(EXPECT != "compiled", reason="RECFN_EXPECT=compiled not set")
def test_core_modules_are_compiled_extensions() -> None:
    assert recfn.COMPILED
    for module in CORE:
        assert module.__file__ is not None and module.__file__.endswith(".so"), module.__file__


@pytest.mark.skipif(EXPECT != "pure", reason="RECFN_EXPECT=pure not set")
def test_core_modules_are_pure_python() -> None:
    assert not recfn.COMPILED
    for module in CORE:
        assert module.__file__ is not None and module.__file__.endswith(".py"), module.__file__


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
