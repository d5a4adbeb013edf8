"""What is native here, answered in one place.

A compiled build (``pip install .``) compiles the modules in ``manifest.COMPILED_MODULES`` with
mypyc and builds the C extensions in this folder (``manifest.C_EXTENSIONS``); a pure build
(``RECFN_NO_MYPYC=1``) builds neither and runs the same code as Python. Every other module asks
this one for an extension (`extension`), the compiled range classes report here whether their
call-protocol glue installed (`report_glue`), and `build_info` puts it all together (it is
``recfn.build_info()`` and what ``recfn --version`` prints).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Optional

from recfn._version import __version__
from recfn.errors import NativeWarning
from recfn.native.manifest import C_EXTENSIONS, COMPILED_MODULES, GLUE_MYPYC_VERSIONS

_extensions: dict[str, Any] = {}
_load_errors: dict[str, str] = {}
_glue: dict[str, Optional[str]] = {}  # glue name -> None when installed, else why not


def extension(name: str) -> Any:
    """The C extension ``recfn.native.<name>`` (a key of ``manifest.C_EXTENSIONS``), or None
    where it is not built (a pure build). One that is built but fails to load (say, built for
    another Python) is None too, and warned about once: the slower path then runs, never
    silently."""
    if name in _extensions:
        return _extensions[name]
    if name not in C_EXTENSIONS:
        raise KeyError(f"{name!r} is not one of recfn's C extensions ({', '.join(C_EXTENSIONS)})")
    full = f"{__name__}.{name}"
    try:
        module: Any = importlib.import_module(full)
    except ImportError as exc:
        module = None
        if _is_extension(full):
            _load_errors[name] = f"{type(exc).__name__}: {exc}"
            warnings.warn(
                f"recfn: the C extension {full} is built but does not load ({exc}); recfn "
                "runs its slower pure-Python path instead (recfn.build_info() says what is native)",
                NativeWarning,
                stacklevel=2,
            )
    _extensions[name] = module
    return module


def report_glue(name: str, why_not: Optional[str]) -> None:
    """Record whether the glue ``name`` installed (``why_not`` None) or not; in a build whose C
    extensions are present a glue that did not install is warned about once."""
    _glue[name] = why_not
    if why_not is not None and any(_extensions.get(ext) is not None for ext in C_EXTENSIONS):
        warnings.warn(
            f"recfn: the {name} glue did not install ({why_not}); ranges work but take the "
            "slower path (recfn.build_info() says what is native)",
            NativeWarning,
            stacklevel=3,
        )


def mypyc_version() -> Optional[str]:
    """The mypyc version the C extensions were built with (None in a pure build)."""
    ccall = extension("_ccall")
    return None if ccall is None else str(getattr(ccall, "MYPYC_VERSION", "unknown"))


def _is_extension(name: str) -> bool:
    """Whether ``name`` is (or would be imported as) an extension module, not Python source."""
    module = sys.modules.get(name)
    if module is not None:
        origin = getattr(module, "__file__", None)
    else:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return False
        origin = None if spec is None else spec.origin
    return str(origin).endswith((".so", ".pyd"))


@dataclass(frozen=True)
class BuildInfo:
    """What is compiled and native in this install (``recfn.build_info()``)."""

    version: str
    python: str
    compiled: bool
    """True when every compiled module is an extension module and every C extension loads."""
    modules: dict[str, str]
    """Each module of ``manifest.COMPILED_MODULES``: ``"compiled"`` or ``"interpreted"``."""
    extensions: dict[str, str]
    """Each C extension: ``"loaded"``, ``"not built"`` or why it failed to load."""
    glue: dict[str, str]
    """Each glue on the compiler's output: ``"installed"`` or why not."""
    mypyc: Optional[str]
    """The mypyc version the C extensions were built with (None in a pure build)."""

    def __str__(self) -> str:
        kind = "compiled (mypyc + C extensions)" if self.compiled else "pure Python"
        if not self.compiled and any(v == "compiled" for v in self.modules.values()):
            kind = "partly compiled (see below)"
        lines = [f"recfn {self.version}", f"Python {self.python}, {kind}"]
        if self.mypyc is not None:
            supported = ", ".join(GLUE_MYPYC_VERSIONS)
            lines.append(f"  built with mypyc {self.mypyc} (the glue supports {supported})")
        lines += [f"  {name}: {state}" for name, state in self.modules.items()]
        lines += [f"  recfn.native.{name}: {state}" for name, state in self.extensions.items()]
        lines += [f"  glue, {name}: {state}" for name, state in self.glue.items()]
        return "\n".join(lines)


def build_info() -> BuildInfo:
    """What is compiled and native here: each mypyc-compiled module, each C extension, and the
    glue on mypyc's output (the range classes' call protocol, reported when ``recfn.engine``
    is imported, which ``import recfn`` does)."""
    modules = {
        name: "compiled" if _is_extension(name) else "interpreted" for name in COMPILED_MODULES
    }
    extensions: dict[str, str] = {}
    for name in C_EXTENSIONS:
        loaded = extension(name) is not None
        extensions[name] = "loaded" if loaded else _load_errors.get(name, "not built")
    glue = {name: "installed" if why is None else why for name, why in _glue.items()}
    compiled = all(v == "compiled" for v in modules.values()) and all(
        v == "loaded" for v in extensions.values()
    )
    version = ".".join(str(part) for part in sys.version_info[:3])
    return BuildInfo(__version__, version, compiled, modules, extensions, glue, mypyc_version())


__all__ = ["BuildInfo", "build_info", "extension", "mypyc_version", "report_glue"]
