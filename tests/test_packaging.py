"""What users install: every package listed, and a wheel that carries the stubs and py.typed but
no C sources, with runtime dependencies as ranges (the compiler is pinned in the build only)."""

from __future__ import annotations

import email
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[1]
LAYERS = {"recfn": "recfn", "analysis": "recfn.analysis", "notebook_ext": "recfn.notebook_ext"}
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def source_packages() -> set[str]:
    found = set()
    for folder, name in LAYERS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(REPO / folder).parts
            found.add(".".join((name, *relative)))
    return found


def exact_pin(requirement: str) -> bool:
    """Whether `requirement` pins a version (``==``, ``===``), whatever its environment marker
    compares (``platform_machine == 'x86_64'`` is not a pin)."""
    from packaging.requirements import Requirement

    return any(spec.operator in ("==", "===") for spec in Requirement(requirement).specifier)


def test_every_package_is_listed_for_setuptools() -> None:
    assert set(PYPROJECT["tool"]["setuptools"]["packages"]) == source_packages()


def test_runtime_dependencies_are_ranges_and_the_compiler_is_pinned_in_the_build_only() -> None:
    for requirement in PYPROJECT["project"]["dependencies"]:
        assert not exact_pin(requirement), requirement
    assert any(r.startswith("librt>=") for r in PYPROJECT["project"]["dependencies"])
    assert "mypy==" in " ".join(PYPROJECT["build-system"]["requires"])


@pytest.fixture(scope="module")
def pure_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pure wheel (RECFN_NO_MYPYC=1) built from a copy of the checkout; the compiled wheel
    differs only by its extension modules."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "src"
    skip = shutil.ignore_patterns("*.so", "*.pyd", "__pycache__", "build", "*.egg-info")
    for folder in LAYERS:
        shutil.copytree(REPO / folder, source / folder, ignore=skip)
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE", "MANIFEST.in"):
        shutil.copy2(REPO / name, source / name)
    env = dict(os.environ, RECFN_NO_MYPYC="1")
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    proc = subprocess.run(
        [*cmd, "-w", str(work / "dist"), str(source)], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    (wheel,) = (work / "dist").glob("recfn-*.whl")
    return wheel


def test_the_wheel_carries_stubs_and_data_but_no_c_sources(pure_wheel: Path) -> None:
    names = zipfile.ZipFile(pure_wheel).namelist()
    assert not [n for n in names if n.endswith((".c", ".h"))]
    for stub in ("_crange", "_ccall", "_ctrace", "_cchrome", "_csummary"):
        assert f"recfn/native/{stub}.pyi" in names
    assert "recfn/py.typed" in names
    assert "recfn/notebook_ext/widget/timeline.js" in names
    assert "recfn/analysis/stats/summary.py" in names
    assert not [n for n in names if n.split("/")[0] in ("analysis", "notebook_ext", "tests")]


def test_the_wheel_metadata_has_an_spdx_license_and_no_exact_pins(pure_wheel: Path) -> None:
    with zipfile.ZipFile(pure_wheel) as wheel:
        (meta,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_bytes(wheel.read(meta))
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in wheel.namelist())
    assert metadata["License-Expression"] == "MIT"
    for requirement in metadata.get_all("Requires-Dist") or []:
        if "extra ==" not in requirement:
            assert not exact_pin(requirement), requirement
