"""recfn.chrome, recfn.schema and recfn.dataset are the stable public names of recfn.formats'
modules: each re-exports the same objects, and recfn.schema every public name the schema owner
defines (a new constant forgotten in its ``__all__`` fails here)."""

from __future__ import annotations

import ast
import importlib
import inspect

import pytest

FACES = {
    "recfn.chrome": "recfn.formats.chrome",
    "recfn.schema": "recfn.formats.schema",
    "recfn.dataset": "recfn.formats.dataset",
}


@pytest.mark.parametrize(("face", "home"), sorted(FACES.items()))
def test_a_face_exports_the_same_objects_as_its_home(face: str, home: str) -> None:
    public, source = importlib.import_module(face), importlib.import_module(home)
    assert public.__all__ == source.__all__
    for name in source.__all__:
        assert getattr(public, name) is getattr(source, name), name


@pytest.mark.parametrize("home", ["recfn.formats.schema", "recfn.formats.dataset"])
def test_every_public_name_defined_is_exported(home: str) -> None:
    module = importlib.import_module(home)
    tree = ast.parse(inspect.getsource(module))
    defined: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defined.add(node.target.id)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
    public = {name for name in defined if not name.startswith("_")}
    assert public <= set(module.__all__), sorted(public - set(module.__all__))
