"""Short names and source locations of traced calls (``widget.names``)."""

from __future__ import annotations

import functools
import sys
import types

import pytest

from recfn.notebook_ext.widget.names import location, short_name


@pytest.mark.parametrize(
    ("name", "short"),
    [
        (
            "pandas.core.groupby.generic::SeriesGroupBy._cython_transform",
            "SeriesGroupBy._cython_transform",
        ),
        ("pandas.core.frame::DataFrame.apply", "DataFrame.apply"),
        ("__main__::work", "work"),
        ("pkg.mod::outer.<locals>.inner.<locals>.wrapper", "inner.wrapper"),
        ("aten::mm", "aten::mm"),  # a namespace, not a Python module: kept whole
        ("step", "step"),
        ("a::b::c", "a::b::c"),
        ("", ""),
    ],
)
def test_short_names(name: str, short: str) -> None:
    assert short_name(name) == short


def _decorate(func):  # type: ignore[no-untyped-def]
    @functools.wraps(func)
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        return func(*args, **kwargs)

    return wrapper


@pytest.fixture
def module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A module ``recfn_names_probe`` defined in a file ``probe.py`` below a ``sys.path`` entry."""
    source = (
        "class Klass:\n"
        "    def method(self):\n"
        "        return 1\n"
        "    @property\n"
        "    def attr(self):\n"
        "        return 2\n"
        "def plain():\n"
        "    return 3\n"
    )
    probe = types.ModuleType("recfn_names_probe")
    folder = "/srv/site"
    probe.__file__ = f"{folder}/probe.py"
    exec(compile(source, probe.__file__, "exec"), probe.__dict__)
    probe.decorated = _decorate(probe.plain)
    monkeypatch.setitem(sys.modules, "recfn_names_probe", probe)
    monkeypatch.setattr(sys, "path", [*sys.path, folder])
    return probe


@pytest.mark.parametrize(
    ("qualname", "line"),
    [
        ("Klass.method", 2),
        ("Klass.attr", 4),
        ("plain", 7),
        ("decorated", 7),
    ],  # a decorated def starts at its decorator
)
def test_locations_are_relative_to_their_sys_path_folder(
    module: types.ModuleType, qualname: str, line: int
) -> None:
    assert location(f"recfn_names_probe::{qualname}") == f"probe.py:{line}"


@pytest.mark.parametrize(
    "name",
    [
        "recfn_names_probe::missing",
        "not_imported_here::f",
        "aten::mm",
        "step",
        "recfn_names_probe::Klass",
    ],
)
def test_no_location_where_there_is_none(module: types.ModuleType, name: str) -> None:
    assert location(name) == ""
