"""recfn codegen: the generated module wraps like instrument() and can be imported instead."""

from __future__ import annotations

import importlib.util
import inspect
import json
import sys

import pytest
from instrument_helpers import Names

from recfn.instrumentation.codegen import generate, main


def load(path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_json_module_records_and_keeps_signatures(tmp_path) -> None:
    out = tmp_path / "traced_json.py"
    assert (
        main(["json", "-o", str(out), "--rename", "loads=parse", "--exclude", "detect_encoding"])
        == 0
    )
    source = out.read_text()
    compile(source, str(out), "exec")
    assert "def dumps(*args: Any, **kwargs: Any) -> Any:" in source
    traced = load(out, "traced_json")
    assert traced.__all__ == json.__all__
    assert traced.JSONDecoder is json.JSONDecoder and traced.detect_encoding is json.detect_encoding
    for name in ("dump", "dumps", "load", "loads"):
        assert inspect.signature(getattr(traced, name)) == inspect.signature(getattr(json, name))
        assert getattr(traced, name).__wrapped__ is getattr(json, name)
        assert getattr(traced, name).__doc__ == getattr(json, name).__doc__
    with Names(needs_outputs=True) as log:
        assert traced.loads(traced.dumps({"a": 1})) == {"a": 1}
    assert log.started == ["json::dumps", "json::parse"]
    assert log.outputs == ['{"a": 1}', {"a": 1}]
    assert json.dumps.__module__ == "json" and not hasattr(json.dumps, "__wrapped__")


def test_generate_matches_instrument_selection() -> None:
    source = generate("json", include=["dumps"], prefix="J", scope="user_scope")
    assert "'J::dumps', 7, args, kwargs" in source
    assert "def loads(" not in source and "loads = _target.loads" in source


def test_async_functions_use_the_async_template(tmp_path, monkeypatch) -> None:
    (tmp_path / "amod_src.py").write_text("async def get(x):\n    return x + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    source = generate("amod_src")
    assert "async def get(*args: Any, **kwargs: Any) -> Any:" in source
    assert "return await _get_original(*args, **kwargs)" in source
    sys.modules.pop("amod_src", None)


def test_cli_stdout_and_errors(capsys) -> None:
    assert main(["json", "--include", "dumps"]) == 0
    assert "def dumps(" in capsys.readouterr().out
    assert main(["no_such_module_recfn"]) == 2
    assert "no_such_module_recfn" in capsys.readouterr().err
    assert main(["json", "--rename", "oops"]) == 2
    assert "NAME=NEW" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([])
