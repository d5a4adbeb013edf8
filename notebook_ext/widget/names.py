"""Names as the view shows them: short (``SeriesGroupBy.rank``) with where the code is
(``pandas/core/groupby/groupby.py:4921``), the full name kept for tooltips and the table.

Traced calls are named ``module::qualname`` (``pandas.core.groupby.groupby::GroupBy.rank``).
Their short name is the qualname's last two parts (``<locals>`` left out); names of any other
form (``aten::mm``, ``step``) are their own short name. The location comes from the function
object itself, found in the kernel that recorded it (``sys.modules``), so it needs no column:
a notebook cell's function reads ``In[3]:2``, a library's its path below ``sys.path``.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
from typing import Any, Optional

_TRACED = re.compile(r"^(?P<module>[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*)::(?P<qualname>[\w.<>]+)$")


def _parts(name: str) -> Optional[tuple[str, list[str]]]:
    """The module and qualname parts of a traced call's name, None for any other name."""
    found = _TRACED.match(name)
    if found is None:
        return None
    module = found.group("module")
    if "." not in module and module not in sys.modules and module != "__main__":
        return None  # ``aten::mm``: a namespace, not a Python module
    parts = [part for part in found.group("qualname").split(".") if part != "<locals>"]
    return (module, parts) if parts and all(parts) else None


def short_name(name: str) -> str:
    """``pandas.core.groupby.generic::SeriesGroupBy._cython_transform`` ->
    ``SeriesGroupBy._cython_transform``; any name not of a traced call is returned as it is."""
    parts = _parts(name)
    if parts is None:
        return name
    return ".".join(parts[1][-2:])


def location(name: str) -> str:
    """``file:line`` of the function a traced call's name refers to, where this process can
    find it; ``""`` otherwise (names of other kinds, functions defined in closures, modules not
    imported here). Not cached: a cell may define the function again."""
    found = _TRACED.match(name)
    if found is None:
        return ""
    module = sys.modules.get(found.group("module"))
    if module is None:
        return ""
    target: Any = module
    for part in found.group("qualname").split("."):
        target = getattr(target, part, None)
        if target is None:
            return ""
    code = _code_of(target)
    if code is None:
        return ""
    return f"{_where(code.co_filename)}:{code.co_firstlineno}"


def _code_of(target: Any) -> Any:
    """The code object of a function, method, property getter or wrapped function (the
    function a decorator wraps, not the decorator's wrapper)."""
    for candidate in (target, getattr(target, "fget", None), getattr(target, "__func__", None)):
        if candidate is None:
            continue
        try:
            candidate = inspect.unwrap(candidate)
        except ValueError:  # a cycle of __wrapped__
            pass
        code = getattr(candidate, "__code__", None)
        if code is not None:
            return code
    return None


def _where(filename: str) -> str:
    """A notebook cell as ``In[N]``, a file below a ``sys.path`` folder relative to it, any
    other file by its name."""
    cell = _cell_number(filename)
    if cell is not None:
        return f"In[{cell}]"
    best = ""
    for folder in sys.path:
        if (
            folder
            and filename.startswith(folder.rstrip(os.sep) + os.sep)
            and len(folder) > len(best)
        ):
            best = folder
    if best:
        return os.path.relpath(filename, best)
    return os.path.basename(filename)


def _cell_number(filename: str) -> Optional[int]:
    """The execution count of the notebook cell IPython compiled as ``filename``, if any."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    names = getattr(getattr(shell, "compile", None), "_filename_map", None)
    if not isinstance(names, dict):
        return None
    number = names.get(filename)
    return number if isinstance(number, int) else None
