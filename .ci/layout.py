"""Copy the Python sources into DIR in the installed layout: recfn/ with analysis/ and
notebook_ext/ as recfn/analysis and recfn/notebook_ext (setuptools' package-dir does the same at
install). mypy and lint-imports read files, not install maps, so .ci/lint runs them on this copy:
plain files, no links (a checkout without symlink support works the same).

    python .ci/layout.py DIR
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {"recfn": "recfn", "analysis": "recfn/analysis", "notebook_ext": "recfn/notebook_ext"}
SOURCES = ("*.py", "*.pyi", "py.typed")


def stage(target: Path) -> None:
    for source, destination in LAYERS.items():
        for pattern in SOURCES:
            for path in (ROOT / source).rglob(pattern):
                if "__pycache__" in path.parts:
                    continue
                copy = target / destination / path.relative_to(ROOT / source)
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, copy)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    stage(Path(sys.argv[1]))
