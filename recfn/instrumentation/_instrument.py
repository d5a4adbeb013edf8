"""``recfn.instrument``: wrap the public callables of a module, class or instance in ranges.

The Python counterpart of PyTorch's generated TraceType kernels (gen_trace_type.py): one wrapper
per callable, stamped from the templates in ``recfn.instrumentation._wrappers``, with a skip list (the seed's
``DONT_RECORD_TRACE``) and renames (``RENAME_TRACE``). ``undo()`` puts every original back.
"""

from __future__ import annotations

import fnmatch
import threading
import types
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Optional, Union

from recfn.engine.scope import RecordScope, as_scope
from recfn.errors import RecfnTypeError, RecfnValueError
from recfn.instrumentation._wrappers import Kind, is_wrapper, make_wrapper

Patterns = Union[str, Iterable[str], None]

ALWAYS_SKIPPED = ("recfn", "recfn.*")
"""recfn's own callables are never wrapped: they would record themselves."""

DEFAULT_SKIP_LIST = (
    # They look at their caller's frame; a wrapper frame in between changes what they see.
    "builtins.locals",
    "builtins.globals",
    "builtins.vars",
    "builtins.dir",
    "builtins.eval",
    "builtins.exec",
    "builtins.__import__",
    "builtins.breakpoint",
    "sys._getframe",
    "inspect.currentframe",
    "inspect.stack",
    "collections.namedtuple",
    "warnings.warn",
    "warnings.warn_explicit",
    "logging.*",
    "typing.*",
)
"""Qualified names (``module.qualname``, fnmatch patterns) ``instrument`` leaves alone by default."""

NEVER_WRAPPED = frozenset(
    {
        "__new__",
        "__init_subclass__",
        "__class_getitem__",
        "__subclasshook__",
        "__getattribute__",
        "__getattr__",
        "__setattr__",
        "__delattr__",
        "__del__",
        "__set_name__",
        "__instancecheck__",
        "__subclasscheck__",
    }
)
"""Dunders that cannot be wrapped even when named in ``include``: Python calls them implicitly
in ways a wrapper would break (attribute access, class creation, finalisation)."""

_MISSING: Any = object()
_lock = threading.Lock()
_skip_list: list[str] = list(DEFAULT_SKIP_LIST)
_IMMUTABLE_TYPE_FLAG = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE


def add_to_skip_list(*items: Union[str, Callable[..., Any]]) -> None:
    """Never wrap these: callables, or ``"module.qualname"`` names / fnmatch patterns."""
    entries = [_skip_entry(item) for item in items]
    with _lock:
        for entry in entries:
            if entry not in _skip_list:
                _skip_list.append(entry)


def remove_from_skip_list(*items: Union[str, Callable[..., Any]]) -> None:
    """Allow wrapping these again (entries of the default list included)."""
    entries = [_skip_entry(item) for item in items]
    with _lock:
        for entry in entries:
            if entry not in _skip_list:
                raise RecfnValueError(f"{entry!r} is not on the skip list")
            _skip_list.remove(entry)


def skip_list() -> tuple[str, ...]:
    """The current skip list (``recfn`` itself is always skipped besides these)."""
    with _lock:
        return tuple(_skip_list)


def _skip_entry(item: Union[str, Callable[..., Any]]) -> str:
    if isinstance(item, str):
        if not item:
            raise RecfnValueError(
                "a skip list entry must be a non-empty 'module.qualname' or pattern"
            )
        return item
    if callable(item):
        return _qualified_name(item)
    raise RecfnTypeError(
        f"skip list entries are callables or 'module.qualname' strings, got {item!r}"
    )


def _qualified_name(fn: Any) -> str:
    module = getattr(fn, "__module__", None) or "builtins"
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    return f"{module}.{qualname}"


def _is_skipped(qualified: str) -> bool:
    if any(fnmatch.fnmatchcase(qualified, p) for p in ALWAYS_SKIPPED):
        return True
    with _lock:
        patterns = tuple(_skip_list)
    return any(fnmatch.fnmatchcase(qualified, p) for p in patterns)


@dataclass
class _Patch:
    """One replaced attribute: ``owner.attr`` was ``original`` (``_MISSING``: absent) and is ``wrapper``."""

    owner: Any
    attr: str
    original: Any
    wrapper: Any
    in_vars: bool  # set through vars(owner) (modules, instances) rather than setattr (classes)

    def current(self) -> Any:
        return vars(self.owner).get(self.attr, _MISSING)

    def install(self) -> None:
        if self.in_vars:
            vars(self.owner)[self.attr] = self.wrapper
        else:
            setattr(self.owner, self.attr, self.wrapper)

    def restore(self) -> None:
        if self.in_vars:
            if self.original is _MISSING:
                del vars(self.owner)[self.attr]
            else:
                vars(self.owner)[self.attr] = self.original
        elif self.original is _MISSING:
            delattr(self.owner, self.attr)
        else:
            setattr(self.owner, self.attr, self.original)


class InstrumentHandle:
    """What ``instrument`` changed. ``undo()`` (or leaving its ``with`` block) restores it all.

    ``wrapped`` maps attribute names to range names; ``skipped`` maps the callables left alone
    to the reason.
    """

    def __init__(
        self, target: Any, wrapped: dict[str, str], skipped: dict[str, str], patches: list[_Patch]
    ) -> None:
        self.target = target
        self.wrapped = wrapped
        self.skipped = skipped
        self._patches = patches
        self._undone = False

    @property
    def active(self) -> bool:
        """Whether the wrappers are still installed (``undo`` not called yet)."""
        return not self._undone

    def undo(self) -> None:
        """Put every original back exactly (``is`` the original). Calling it again does nothing.

        An attribute replaced by someone else after instrumenting is left as it is, with a warning.
        """
        patches, self._patches = self._patches, []
        self._undone = True
        for patch in reversed(patches):
            if patch.current() is not patch.wrapper:
                warnings.warn(
                    f"recfn.instrument: {_describe(patch.owner)}.{patch.attr} was replaced after "
                    "it was instrumented; leaving the new value in place",
                    RuntimeWarning,
                    stacklevel=2,
                )
                continue
            patch.restore()

    def __enter__(self) -> InstrumentHandle:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.undo()

    def __repr__(self) -> str:
        state = "active" if self.active else "undone"
        return (
            f"<recfn.InstrumentHandle {_describe(self.target)}: {len(self.wrapped)} wrapped, "
            f"{len(self.skipped)} skipped, {state}>"
        )


def _describe(target: Any) -> str:
    if isinstance(target, types.ModuleType):
        return target.__name__
    if isinstance(target, type):
        return target.__qualname__
    return f"<{type(target).__qualname__} instance>"


def _patterns(value: Patterns, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    patterns = tuple(value)
    for p in patterns:
        if not isinstance(p, str) or not p:
            raise RecfnTypeError(
                f"{what} must be names or fnmatch patterns (non-empty str), got {p!r}"
            )
    return patterns


def _is_pattern(text: str) -> bool:
    return any(ch in text for ch in "*?[")


class _Selection:
    """Which attribute names to wrap: public names, narrowed by include and exclude patterns.

    A name written out exactly in ``include`` is wrapped even if private or a dunder; a pattern
    only picks among public names.
    """

    def __init__(self, include: Patterns, exclude: Patterns) -> None:
        inc = _patterns(include, "include")
        self.restricted = include is not None
        self.exact = frozenset(p for p in inc if not _is_pattern(p))
        self.include = tuple(p for p in inc if _is_pattern(p))
        self.exclude = _patterns(exclude, "exclude")
        bad = sorted(self.exact & NEVER_WRAPPED)
        if bad:
            raise RecfnValueError(
                f"cannot instrument {', '.join(bad)}: Python calls them implicitly"
            )

    def picks(self, name: str) -> bool:
        if any(fnmatch.fnmatchcase(name, p) for p in self.exclude):
            return False
        if name in self.exact:
            return True
        if name.startswith("_"):
            return False
        return not self.restricted or any(fnmatch.fnmatchcase(name, p) for p in self.include)


@dataclass
class _Candidate:
    """A callable found on the target, with how to wrap it and where to put the wrapper."""

    attr: str
    original: Any  # what vars(owner)[attr] held (_MISSING for an inherited method on an instance)
    kind: Optional[Kind]  # None: a property
    func: Any  # the callable the wrapper calls (the bound method, for instances)
    reason: Optional[str] = None  # why it is left alone
    foreign: Optional[str] = None  # the module it was imported from, when not the target's package


def instrument(
    target: Any,
    include: Patterns = None,
    exclude: Patterns = None,
    rename: Optional[Mapping[str, str]] = None,
    scope: Any = RecordScope.FUNCTION,
    prefix: Optional[str] = None,
) -> InstrumentHandle:
    """Wrap the public callables of a module, class or instance so each call is a range.

    Range names are ``prefix::qualname`` (``prefix`` defaults to the module name), e.g.
    ``json::dumps`` or ``mymod::Model.forward``. ``include``/``exclude`` are attribute names or
    fnmatch patterns; an exact name in ``include`` also selects a private name, a dunder or a
    property (properties and dunders are left alone otherwise). ``rename`` maps an attribute
    name or qualname to another qualname (or, containing ``::``, to a whole range name).
    Callables already instrumented, on the skip list (``recfn.add_to_skip_list``), generator
    functions and classes are left alone and listed in ``handle.skipped``.
    """
    p = plan(target, include, exclude, rename, scope, prefix)
    with _lock:
        for patch in p.patches:
            patch.install()
    return InstrumentHandle(target, p.wrapped, p.skipped, p.patches)


@dataclass
class Plan:
    """What ``instrument`` would do: range names, kinds and wrappers of what it wraps, and why it skips the rest."""

    wrapped: dict[str, str]
    kinds: dict[str, Optional[Kind]]  # None: a property
    skipped: dict[str, str]
    patches: list[_Patch]


def plan(
    target: Any,
    include: Patterns = None,
    exclude: Patterns = None,
    rename: Optional[Mapping[str, str]] = None,
    scope: Any = RecordScope.FUNCTION,
    prefix: Optional[str] = None,
) -> Plan:
    """Select, name and build the wrappers for ``target`` without installing them."""
    rf_scope = int(as_scope(scope))
    selection = _Selection(include, exclude)
    renames = dict(rename or {})
    for key, value in renames.items():
        if not isinstance(key, str) or not isinstance(value, str) or not value:
            raise RecfnTypeError(
                f"rename maps names to non-empty str names, got {key!r}: {value!r}"
            )
    if prefix is not None and (not isinstance(prefix, str) or not prefix):
        raise RecfnTypeError(f"prefix must be a non-empty str, got {prefix!r}")

    if isinstance(target, types.ModuleType):
        candidates = _module_candidates(target)
        default_prefix, in_vars = target.__name__, True
    elif isinstance(target, type):
        if target.__flags__ & _IMMUTABLE_TYPE_FLAG:
            raise RecfnTypeError(
                f"cannot instrument {target.__qualname__}: it is a built-in (immutable) type"
            )
        candidates = _class_candidates(target)
        default_prefix, in_vars = target.__module__, False
    elif isinstance(target, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        raise RecfnTypeError(
            "instrument() wraps the callables of a module, class or instance; to record one "
            "function, decorate it with recfn.record_function(name)"
        )
    else:
        if not isinstance(getattr(target, "__dict__", None), dict):
            raise RecfnTypeError(
                f"cannot instrument a {type(target).__qualname__} instance: it has no __dict__ "
                "to hold the wrappers (instrument its class instead)"
            )
        candidates = _instance_candidates(target)
        default_prefix, in_vars = type(target).__module__, True

    found = {c.attr for c in candidates}
    missing = sorted(selection.exact - found)
    if missing:
        raise RecfnValueError(f"include names {missing} are not callables of {_describe(target)}")
    range_prefix = prefix or default_prefix
    owner_name = (
        target.__name__
        if isinstance(target, types.ModuleType)
        else _qualified_name(target if isinstance(target, type) else type(target))
    )

    wrapped: dict[str, str] = {}
    kinds: dict[str, Optional[Kind]] = {}
    skipped: dict[str, str] = {}
    patches: list[_Patch] = []
    used_renames: set[str] = set()
    for cand in candidates:
        if not selection.picks(cand.attr):
            continue
        if cand.reason is not None:
            skipped[cand.attr] = cand.reason
            continue
        if cand.foreign is not None and cand.attr not in selection.exact:
            skipped[cand.attr] = f"imported from {cand.foreign}: name it in include to wrap it here"
            continue
        if cand.kind is None and cand.attr not in selection.exact:
            continue  # properties only when named
        func = _underlying(cand.func)
        qualified = _qualified_name(func)
        location = f"{owner_name}.{cand.attr}"  # where it is reached, e.g. warnings.warn for _warnings.warn
        if _is_skipped(qualified) or _is_skipped(location):
            skipped[cand.attr] = (
                f"on the skip list ({qualified if _is_skipped(qualified) else location})"
            )
            continue
        qualname = str(getattr(func, "__qualname__", None) or cand.attr)
        for key in (cand.attr, qualname):
            if key in renames:
                used_renames.add(key)
                qualname = renames[key]
                break
        name = qualname if "::" in qualname else f"{range_prefix}::{qualname}"
        wrapper = _build(cand, name, rf_scope)
        patches.append(_Patch(target, cand.attr, cand.original, wrapper, in_vars))
        wrapped[cand.attr] = name
        kinds[cand.attr] = cand.kind
    unused = sorted(set(renames) - used_renames)
    if unused:
        raise RecfnValueError(
            f"rename names {unused}, which are not instrumented callables of {_describe(target)}"
        )

    return Plan(wrapped, kinds, skipped, patches)


def _underlying(func: Any) -> Any:
    """The function a property stands for (its getter)."""
    return func.fget if isinstance(func, property) else func


def _build(cand: _Candidate, name: str, scope: int) -> Any:
    kind = cand.kind
    if kind is None:
        prop: property = cand.func
        accessors = []
        for suffix, fn in (("", prop.fget), (".setter", prop.fset), (".deleter", prop.fdel)):
            accessors.append(
                None if fn is None else make_wrapper(fn, Kind.METHOD, name + suffix, scope)
            )
        return property(accessors[0], accessors[1], accessors[2], prop.__doc__)
    wrapper = make_wrapper(cand.func, kind, name, scope)
    if kind.decorator == "staticmethod":
        return staticmethod(wrapper)
    if kind.decorator == "classmethod":
        return classmethod(wrapper)
    return wrapper


def _function_kind(fn: Any, binding: Kind) -> tuple[Optional[Kind], Optional[str]]:
    """``binding``, made async for coroutine functions; or None and why ``fn`` is left alone."""
    if isinstance(fn, types.BuiltinFunctionType):
        return binding, None
    if not isinstance(fn, types.FunctionType):
        return None, f"not a function ({type(fn).__name__})"
    import inspect  # here, not at the top: keeps `import recfn` fast

    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        return None, "generator function: a range would only cover creating the generator"
    if inspect.iscoroutinefunction(fn):
        return binding.asynchronous(), None
    return binding, None


def _module_candidates(module: types.ModuleType) -> list[_Candidate]:
    top = module.__name__.partition(".")[0]
    out = []
    for attr, value in list(vars(module).items()):
        if not callable(value):
            continue
        if is_wrapper(value):
            out.append(_Candidate(attr, value, None, value, "already instrumented"))
            continue
        if isinstance(value, type):
            out.append(_Candidate(attr, value, None, value, "class: instrument it separately"))
            continue
        kind, reason = _function_kind(value, Kind.FUNCTION)
        origin = getattr(value, "__module__", None)
        foreign = origin if origin and origin != top and not origin.startswith(top + ".") else None
        out.append(_Candidate(attr, value, kind, value, reason, foreign))
    return out


def _class_candidates(cls: type) -> list[_Candidate]:
    out = []
    for attr, value in list(vars(cls).items()):
        if is_wrapper(value):
            out.append(_Candidate(attr, value, None, value, "already instrumented"))
        elif isinstance(value, staticmethod):
            kind, reason = _function_kind(value.__func__, Kind.STATICMETHOD)
            out.append(_Candidate(attr, value, kind, value.__func__, reason))
        elif isinstance(value, classmethod):
            kind, reason = _function_kind(value.__func__, Kind.CLASSMETHOD)
            out.append(_Candidate(attr, value, kind, value.__func__, reason))
        elif isinstance(value, property):
            out.append(_Candidate(attr, value, None, value))
        elif isinstance(value, types.FunctionType):
            kind, reason = _function_kind(value, Kind.METHOD)
            out.append(_Candidate(attr, value, kind, value, reason))
    return out


def _instance_candidates(obj: Any) -> list[_Candidate]:
    """Methods the instance gets from its classes, wrapped as bound methods in its ``__dict__``."""
    own = vars(obj)
    seen: set[str] = set()
    out = []
    for klass in type(obj).__mro__:
        if klass is object:
            continue
        for attr, value in list(vars(klass).items()):
            if attr in seen:
                continue
            seen.add(attr)
            current = own.get(attr, _MISSING)
            if current is not _MISSING:
                why = "already instrumented" if is_wrapper(current) else "instance attribute"
                out.append(_Candidate(attr, current, None, current, why))
            elif is_wrapper(value):
                out.append(_Candidate(attr, _MISSING, None, value, "already instrumented"))
            elif isinstance(value, property):
                out.append(
                    _Candidate(attr, _MISSING, None, value, "property: instrument the class")
                )
            elif isinstance(value, (staticmethod, classmethod, types.FunctionType)):
                fn = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
                kind, reason = _function_kind(fn, Kind.METHOD)
                bound = getattr(obj, attr) if reason is None else fn
                out.append(_Candidate(attr, _MISSING, kind, bound, reason))
    return out
