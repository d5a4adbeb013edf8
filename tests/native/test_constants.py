"""The constants C and Python share have one source, recfn/native/constants.py: setup.py writes
them into the header the C files include, so no C file may define its own copy."""

from __future__ import annotations

import re
from pathlib import Path

from recfn.native import constants

NATIVE = Path(constants.__file__).resolve().parent


def shared_names() -> list[str]:
    return [name for name in vars(constants) if name.isupper()]


def test_constants_are_integers() -> None:
    assert shared_names()
    for name in shared_names():
        assert type(getattr(constants, name)) is int, name


def test_no_c_file_defines_a_shared_constant_itself() -> None:
    sources = sorted(NATIVE.glob("*.c"))
    assert sources
    for source in sources:
        text = source.read_text()
        for name in shared_names():
            defined = re.search(rf"#define\s+{name}\b|enum\s*\{{[^}}]*\b{name}\b", text)
            assert defined is None, f"{source.name} defines {name}: include recfn_constants.h"


def test_c_files_that_use_shared_constants_include_the_generated_header() -> None:
    for source in sorted(NATIVE.glob("*.c")):
        text = source.read_text()
        if any(re.search(rf"\b{name}\b", text) for name in shared_names()):
            assert '#include "recfn_constants.h"' in text, source.name
