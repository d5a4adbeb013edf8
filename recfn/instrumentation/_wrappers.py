"""Wrapper code templates: the one place that says what an instrumented call does.

As PyTorch's gen_trace_type.py emits one tracing kernel per operator from a few templates, recfn
emits one wrapper per callable from the templates below. ``recfn.instrument`` compiles each
template once into a factory and stamps out closures from it; ``recfn codegen`` writes the same
text, with names filled in, into a reviewable module. Either way a call does:

* nothing but one test of the engine's callback count and the original call when no callback
  is registered;
* otherwise ``begin_call`` (the engine hands ``args``/``kwargs`` to callbacks only when one of
  them asked for inputs — the tuple and dict exist anyway, so nothing is computed for them),
  the original call, ``set_outputs`` only when ``rf.needs_outputs``, and ``end_range`` in a
  ``finally`` so exceptions end the range and propagate unchanged.
"""

from __future__ import annotations

import enum
import functools
import linecache
from collections.abc import Callable
from typing import Any, Optional

from recfn.engine.ranges import _reg as _registry
from recfn.engine.ranges import begin_call, end_range

WRAPPER_FLAG = "__recfn_wrapper__"
"""Attribute set on every wrapper, so instrumenting twice wraps once."""


class Kind(enum.Enum):
    """How a callable is bound where it lives (sync or async): picks the template and decorator."""

    FUNCTION = "function"
    ASYNC_FUNCTION = "async function"
    METHOD = "method"
    ASYNC_METHOD = "async method"
    STATICMETHOD = "staticmethod"
    ASYNC_STATICMETHOD = "async staticmethod"
    CLASSMETHOD = "classmethod"
    ASYNC_CLASSMETHOD = "async classmethod"

    @property
    def is_async(self) -> bool:
        return self.value.startswith("async ")

    @property
    def decorator(self) -> Optional[str]:
        """``staticmethod``/``classmethod`` for those kinds, else None."""
        binding = self.value.rpartition(" ")[2]
        return binding if binding in ("staticmethod", "classmethod") else None

    def asynchronous(self) -> Kind:
        """The async kind with the same binding."""
        return self if self.is_async else Kind("async " + self.value)


# Placeholders: {fn} the wrapper's name, {target} the expression naming the original callable,
# {name} and {scope} the expressions giving the range name (str) and scope (int).
SYNC_TEMPLATE = """\
def {fn}(*args: Any, **kwargs: Any) -> Any:
    if _registry.n_callbacks == 0:
        return {target}(*args, **kwargs)
    rf = _begin_call({name}, {scope}, args, kwargs)
    if rf is None:
        return {target}(*args, **kwargs)
    try:
        out: Any = {target}(*args, **kwargs)
        if rf.needs_outputs:
            rf.set_outputs(out)
        return out
    finally:
        _end_range(rf)
"""

ASYNC_TEMPLATE = """\
async def {fn}(*args: Any, **kwargs: Any) -> Any:
    if _registry.n_callbacks == 0:
        return await {target}(*args, **kwargs)
    rf = _begin_call({name}, {scope}, args, kwargs)
    if rf is None:
        return await {target}(*args, **kwargs)
    try:
        out: Any = await {target}(*args, **kwargs)
        if rf.needs_outputs:
            rf.set_outputs(out)
        return out
    finally:
        _end_range(rf)
"""


def template_for(kind: Kind) -> str:
    return ASYNC_TEMPLATE if kind.is_async else SYNC_TEMPLATE


def render(kind: Kind, fn: str, target: str, name: str, scope: str) -> str:
    """The source of one wrapper (``name`` and ``scope`` are Python expressions)."""
    return template_for(kind).format(fn=fn, target=target, name=name, scope=scope)


def _indent(text: str) -> str:
    return "".join("    " + line if line.strip() else line for line in text.splitlines(True))


def _compile_factory(
    is_async: bool,
) -> Callable[[Callable[..., Any], str, int], Callable[..., Any]]:
    """Compile ``make(original, name, scope) -> wrapper`` from a template, once per template."""
    kind = Kind.ASYNC_FUNCTION if is_async else Kind.FUNCTION
    body = render(kind, fn="wrapper", target="original", name="name", scope="scope")
    source = f"def make(original, name, scope):\n{_indent(body)}    return wrapper\n"
    filename = f"<recfn {kind.value} wrapper>"
    # Registered with linecache so tracebacks through a wrapper show its source lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {
        "__name__": __name__,
        "Any": Any,
        "_registry": _registry,
        "_begin_call": begin_call,
        "_end_range": end_range,
    }
    exec(compile(source, filename, "exec"), namespace)
    factory: Callable[[Callable[..., Any], str, int], Callable[..., Any]] = namespace["make"]
    return factory


_make_sync = _compile_factory(False)
_make_async = _compile_factory(True)


def make_wrapper(
    original: Callable[..., Any], kind: Kind, name: str, scope: int
) -> Callable[..., Any]:
    """A wrapper of ``original`` recording a range ``name`` per call.

    Returns the plain function; the caller applies ``staticmethod``/``classmethod`` for those
    kinds. The wrapper keeps ``__name__``, ``__qualname__``, ``__doc__``, ``__module__`` and
    ``__wrapped__`` (so ``inspect.signature`` reports the original's signature).
    """
    make = _make_async if kind.is_async else _make_sync
    wrapper = make(original, name, scope)
    adopt(wrapper, original)
    qualname = str(getattr(original, "__qualname__", getattr(original, "__name__", "wrapper")))
    wrapper.__code__ = wrapper.__code__.replace(
        co_name=qualname.rpartition(".")[2], co_qualname=qualname
    )
    return wrapper


def adopt(wrapper: Callable[..., Any], original: Callable[..., Any]) -> None:
    """Give ``wrapper`` the identity of ``original`` and mark it as a recfn wrapper.

    Tolerates wrappers that take no attributes (a generated module compiled with mypyc):
    they still record, they only lose ``__wrapped__``.
    """
    try:
        functools.update_wrapper(wrapper, original)
        setattr(wrapper, WRAPPER_FLAG, True)
    except (AttributeError, TypeError):
        pass


def is_wrapper(value: object) -> bool:
    """Whether ``value`` (or what a static/class method or property holds) is a recfn wrapper."""
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    elif isinstance(value, property):
        value = value.fget
    return getattr(value, WRAPPER_FLAG, False) is True
