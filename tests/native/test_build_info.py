"""recfn.build_info(): the one answer to "what is compiled and native here", and the warnings a
compiled build gives when part of it did not load or install."""

from __future__ import annotations

import warnings

import pytest

import recfn
from recfn import native
from recfn.errors import NativeWarning
from recfn.native import manifest


def test_build_info_names_every_compiled_module_extension_and_glue() -> None:
    info = recfn.build_info()
    assert info.version == recfn.__version__
    assert list(info.modules) == list(manifest.COMPILED_MODULES)
    assert list(info.extensions) == list(manifest.C_EXTENSIONS)
    assert "call protocol" in info.glue
    assert info.compiled is recfn.COMPILED
    text = str(info)
    assert text.splitlines()[0] == f"recfn {recfn.__version__}"
    for name in [*manifest.COMPILED_MODULES, *manifest.C_EXTENSIONS, "call protocol"]:
        assert name in text


def test_a_pure_build_has_nothing_native_and_says_so() -> None:
    info = recfn.build_info()
    if info.compiled:
        pytest.skip("a compiled build")
    assert set(info.extensions.values()) == {"not built"}
    assert info.mypyc is None
    assert "pure Python" in str(info)


def test_glue_that_did_not_install_warns_where_extensions_are_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(native, "_glue", {})
    monkeypatch.setattr(native, "_extensions", {"_ccall": object()})  # a built extension
    with pytest.warns(NativeWarning, match="the call protocol glue did not install"):
        native.report_glue("call protocol", "no mypyc class layout it knows")
    assert native._glue == {"call protocol": "no mypyc class layout it knows"}


def test_glue_absent_from_a_pure_build_is_not_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "_glue", {})
    monkeypatch.setattr(native, "_extensions", {name: None for name in manifest.C_EXTENSIONS})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        native.report_glue("call protocol", "the range classes are interpreted")


def test_an_extension_that_is_built_but_does_not_load_warns_and_is_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(native, "_extensions", {})
    monkeypatch.setattr(native, "_load_errors", {})
    monkeypatch.setattr(native, "C_EXTENSIONS", {"_missing": "a stand-in that cannot load"})
    monkeypatch.setattr(native, "_is_extension", lambda name: True)
    with pytest.warns(NativeWarning, match="is built but does not load"):
        assert native.extension("_missing") is None
    assert "_missing" in native._load_errors


def test_unknown_extension_names_are_refused() -> None:
    with pytest.raises(KeyError, match="not one of recfn's C extensions"):
        native.extension("_nope")
