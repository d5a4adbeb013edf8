"""recfn.instrument on stdlib json, a sample class and instances: names, skips, renames, undo."""

from __future__ import annotations

import asyncio
import inspect
import json
import warnings

import pytest
from instrument_helpers import Names, make_module

import recfn

JSON_FUNCS = ("dump", "dumps", "load", "loads", "detect_encoding")

SAMPLE = '''
class Sample:
    """A sample class."""

    def __init__(self, base):
        self.base = base

    def add(self, x, y=1, *, scale=2):
        """Add things."""
        return (self.base + x + y) * scale

    async def fetch(self, x):
        return x * 10

    @staticmethod
    def twice(x):
        return 2 * x

    @classmethod
    def make(cls, base):
        return cls(base)

    @staticmethod
    async def later(x):
        return x + 100

    @property
    def value(self):
        return self.base

    @value.setter
    def value(self, v):
        self.base = v

    def __call__(self, x):
        return self.add(x)

    def _helper(self):
        return 1

    def numbers(self):
        yield 1

    def fail(self):
        raise KeyError("boom")


def free(x):
    return Sample(x).add(1)
'''


@pytest.fixture
def sample():
    return make_module("sample_mod", SAMPLE)


def test_json_every_call_recorded_with_module_names() -> None:
    originals = {name: getattr(json, name) for name in JSON_FUNCS}
    with recfn.instrument(json) as handle, Names() as log:
        text = json.dumps({"a": [1, 2]})
        assert json.loads(text) == {"a": [1, 2]}
        assert json.loads(text.encode()) == {"a": [1, 2]}
    assert handle.wrapped == {name: f"json::{name}" for name in JSON_FUNCS}
    assert set(handle.skipped) == {"JSONDecoder", "JSONDecodeError", "JSONEncoder"}
    # loads(bytes) calls detect_encoding through the module globals: it nests.
    assert log.events == [
        ("start", "json::dumps"),
        ("end", "json::dumps"),
        ("start", "json::loads"),
        ("end", "json::loads"),
        ("start", "json::loads"),
        ("start", "json::detect_encoding"),
        ("end", "json::detect_encoding"),
        ("end", "json::loads"),
    ]
    for name, original in originals.items():
        assert getattr(json, name) is original


def test_json_into_profile_table_with_nesting(tmp_path) -> None:
    path = tmp_path / "x.json"
    with recfn.instrument(json), recfn.profile() as prof:
        with open(path, "w") as f:
            json.dump([1], f)
        with open(path) as f:
            json.load(f)
    rows = [r for r in prof.table.to_pylist() if r["kind"] == "range"]
    by_id = {r["id"]: r for r in rows}
    assert [r["name"] for r in rows] == ["json::dump", "json::load", "json::loads"]
    assert all(r["scope"] == "function" for r in rows)
    loads = rows[2]
    assert by_id[loads["parent_id"]]["name"] == "json::load" and loads["depth"] == 1


def test_signatures_names_docs_preserved() -> None:
    expected = {name: inspect.signature(getattr(json, name)) for name in JSON_FUNCS}
    originals = {name: getattr(json, name) for name in JSON_FUNCS}
    with recfn.instrument(json):
        for name in JSON_FUNCS:
            wrapper = getattr(json, name)
            assert wrapper is not originals[name]
            assert inspect.signature(wrapper) == expected[name]
            assert wrapper.__name__ == name
            assert wrapper.__doc__ == originals[name].__doc__
            assert wrapper.__wrapped__ is originals[name]


def test_no_callbacks_no_ranges_same_results() -> None:
    with recfn.instrument(json):
        assert json.dumps([1, "a"]) == '[1, "a"]'


def test_idempotent_wraps_once() -> None:
    first = recfn.instrument(json)
    try:
        wrappers = {name: getattr(json, name) for name in JSON_FUNCS}
        second = recfn.instrument(json)
        assert second.wrapped == {}
        assert all(second.skipped[name] == "already instrumented" for name in JSON_FUNCS)
        assert {name: getattr(json, name) for name in JSON_FUNCS} == wrappers
        with Names() as log:
            json.dumps(1)
        assert log.started == ["json::dumps"]
        second.undo()
        assert json.dumps is wrappers["dumps"]
    finally:
        first.undo()


def test_undo_twice_and_replaced_attribute_warns() -> None:
    original = json.dumps
    handle = recfn.instrument(json, include=["dumps"])
    assert handle.active
    json.dumps = replacement = lambda *a, **k: "x"
    try:
        with pytest.warns(RuntimeWarning, match="json.dumps was replaced"):
            handle.undo()
        assert json.dumps is replacement
        handle.undo()
        assert not handle.active
    finally:
        json.dumps = original


def test_renames_by_attribute_qualname_and_full_name() -> None:
    with (
        recfn.instrument(json, rename={"loads": "parse", "dumps": "codec::encode"}) as handle,
        Names() as log,
    ):
        json.loads(json.dumps(1))
    assert handle.wrapped["loads"] == "json::parse"
    assert handle.wrapped["dumps"] == "codec::encode"
    assert log.started == ["codec::encode", "json::parse"]


def test_unknown_rename_and_include_are_errors() -> None:
    with pytest.raises(ValueError, match="rename names \\['nope'\\]"):
        recfn.instrument(json, rename={"nope": "x"})
    with pytest.raises(ValueError, match="include names \\['nope'\\]"):
        recfn.instrument(json, include=["nope"])
    with pytest.raises(ValueError, match="__getattr__"):
        recfn.instrument(json, include=["__getattr__"])
    assert json.dumps.__module__ == "json" and not hasattr(json.dumps, "__wrapped__")


def test_include_exclude_prefix() -> None:
    with recfn.instrument(json, include=["dump*"], exclude="dump", prefix="J") as handle:
        assert handle.wrapped == {"dumps": "J::dumps"}
        assert not hasattr(json.loads, "__wrapped__")


def test_skip_list_add_remove_and_defaults() -> None:
    assert "warnings.warn" in recfn.skip_list()
    recfn.add_to_skip_list(json.loads, "json.dump")
    try:
        assert "json.loads" in recfn.skip_list()
        with recfn.instrument(json) as handle:
            assert handle.skipped["loads"] == "on the skip list (json.loads)"
            assert handle.skipped["dump"] == "on the skip list (json.dump)"
            assert "dumps" in handle.wrapped
    finally:
        recfn.remove_from_skip_list(json.loads, "json.dump")
    assert "json.loads" not in recfn.skip_list()
    with pytest.raises(ValueError, match="not on the skip list"):
        recfn.remove_from_skip_list("json.loads")
    # frame-sensitive callables stay unwrapped even when named
    with recfn.instrument(warnings, include=["warn"]) as handle:
        assert handle.wrapped == {} and "skip list" in handle.skipped["warn"]


def test_recfn_itself_is_never_wrapped() -> None:
    mod = make_module(
        "uses_recfn", "from recfn import record_function, mark\ndef mine(): return 1\n"
    )
    with recfn.instrument(mod, include=["record_function", "mark", "mine"]) as handle:
        assert set(handle.wrapped) == {"mine"}
        assert "skip list" in handle.skipped["mark"]
        assert mod.mark is recfn.mark


def test_sample_class_kinds_names_and_undo(sample) -> None:
    cls = sample.Sample
    before = dict(vars(cls))
    sig_add = inspect.signature(cls.add)
    with recfn.instrument(cls) as handle, Names() as log:
        assert handle.wrapped == {
            "add": "sample_mod::Sample.add",
            "fetch": "sample_mod::Sample.fetch",
            "twice": "sample_mod::Sample.twice",
            "make": "sample_mod::Sample.make",
            "later": "sample_mod::Sample.later",
            "fail": "sample_mod::Sample.fail",
        }
        assert "generator" in handle.skipped["numbers"]
        obj = cls.make(1)
        assert obj.add(2, scale=3) == 12
        assert cls.twice(4) == 8 and obj.twice(1) == 2
        assert asyncio.run(obj.fetch(3)) == 30
        assert asyncio.run(cls.later(1)) == 101 and inspect.iscoroutinefunction(cls.later)
        assert obj(1) == 6  # __call__ is a dunder: not wrapped, but its add call is
        assert obj._helper() == 1 and obj.value == 1
        with pytest.raises(KeyError, match="boom"):
            obj.fail()
        assert inspect.signature(cls.add) == sig_add
        assert str(inspect.signature(obj.add)) == "(x, y=1, *, scale=2)"
        assert inspect.iscoroutinefunction(cls.fetch)
        assert isinstance(vars(cls)["twice"], staticmethod) and isinstance(
            vars(cls)["make"], classmethod
        )
    assert log.events == [
        ("start", "sample_mod::Sample.make"),
        ("end", "sample_mod::Sample.make"),
        ("start", "sample_mod::Sample.add"),
        ("end", "sample_mod::Sample.add"),
        ("start", "sample_mod::Sample.twice"),
        ("end", "sample_mod::Sample.twice"),
        ("start", "sample_mod::Sample.twice"),
        ("end", "sample_mod::Sample.twice"),
        ("start", "sample_mod::Sample.fetch"),
        ("end", "sample_mod::Sample.fetch"),
        ("start", "sample_mod::Sample.later"),
        ("end", "sample_mod::Sample.later"),
        ("start", "sample_mod::Sample.add"),
        ("end", "sample_mod::Sample.add"),
        ("start", "sample_mod::Sample.fail"),
        ("end", "sample_mod::Sample.fail"),
    ]
    after = dict(vars(cls))
    assert after.keys() == before.keys()
    assert all(after[k] is before[k] for k in before)


def test_dunders_and_properties_only_when_named(sample) -> None:
    cls = sample.Sample
    prop = vars(cls)["value"]
    with recfn.instrument(cls, include=["__call__", "value", "_helper"]) as handle, Names() as log:
        assert set(handle.wrapped) == {"__call__", "value", "_helper"}
        obj = cls(1)
        obj(1)
        obj.value = 5
        assert obj.value == 5
        obj._helper()
    assert log.started == [
        "sample_mod::Sample.__call__",
        "sample_mod::Sample.value.setter",
        "sample_mod::Sample.value",
        "sample_mod::Sample._helper",
    ]
    assert vars(cls)["value"] is prop


def test_instance_only_that_instance(sample) -> None:
    a, b = sample.Sample(1), sample.Sample(1)
    with recfn.instrument(a, include=["add", "twice"]) as handle, Names() as log:
        assert handle.wrapped == {
            "add": "sample_mod::Sample.add",
            "twice": "sample_mod::Sample.twice",
        }
        a.add(1)
        b.add(1)
        a.twice(2)
        assert str(inspect.signature(a.add)) == "(x, y=1, *, scale=2)"
    assert log.started == ["sample_mod::Sample.add", "sample_mod::Sample.twice"]
    assert "add" not in vars(a) and "twice" not in vars(a)


def test_inputs_and_outputs_only_when_asked(sample) -> None:
    obj = sample.Sample(1)
    with recfn.instrument(sample.Sample, include=["add"]):
        with Names() as plain:
            obj.add(2, scale=3)
        with Names(needs_inputs=True, needs_outputs=True) as asking:
            obj.add(2, scale=3)
    assert plain.inputs == [(None, None)] and plain.outputs == [None]
    assert asking.inputs == [((obj, 2), {"scale": 3})]
    assert asking.outputs == [12]


def test_exception_ends_range_and_propagates(sample) -> None:
    with recfn.instrument(sample.Sample, include=["fail"]), recfn.profile() as prof:
        with pytest.raises(KeyError):
            sample.Sample(0).fail()
    rows = [r for r in prof.table.to_pylist() if r["name"] == "sample_mod::Sample.fail"]
    assert len(rows) == 1 and rows[0]["end_ns"] is not None


def test_module_functions_from_elsewhere_are_left_alone(sample) -> None:
    mod = make_module("reexports", "from json import dumps\ndef own(): return dumps(1)\n")
    with recfn.instrument(mod) as handle:
        assert handle.wrapped == {"own": "reexports::own"}
        assert "imported from json" in handle.skipped["dumps"]
    with recfn.instrument(mod, include=["dumps"]) as handle:
        assert handle.wrapped == {"dumps": "reexports::dumps"}
        assert json.dumps.__module__ == "json" and mod.dumps is not json.dumps
    assert mod.dumps is json.dumps


def test_bad_targets() -> None:
    with pytest.raises(TypeError, match="record_function"):
        recfn.instrument(json.dumps)
    with pytest.raises(TypeError, match="immutable"):
        recfn.instrument(dict)
    with pytest.raises(TypeError, match="no __dict__"):
        recfn.instrument(object())
    with pytest.raises(TypeError, match="prefix"):
        recfn.instrument(json, prefix="")
    with pytest.raises(ValueError, match="RecordScope"):
        recfn.instrument(json, scope="nope")


def test_scope_and_async_function() -> None:
    mod = make_module("amod", "async def get(x):\n    return x + 1\n")
    seen = []
    cb = recfn.RecordFunctionCallback(lambda rf: seen.append((rf.name, rf.scope)))
    recfn.add_global_callback(cb)
    with recfn.instrument(mod, scope=recfn.RecordScope.USER_SCOPE):
        assert inspect.iscoroutinefunction(mod.get)
        assert asyncio.run(mod.get(1)) == 2
    assert seen == [("amod::get", recfn.RecordScope.USER_SCOPE)]
