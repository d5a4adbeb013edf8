"""What a compiled build compiles: read by setup.py (without importing recfn) and by
``recfn.build_info()``. One list, so the build, the checks and the docs cannot drift apart."""

from __future__ import annotations

from typing import Final

COMPILED_MODULES: Final = (
    "recfn.engine.ranges",
    "recfn.engine.registry",
    "recfn.capture._recorder",
    "recfn.capture._stacks",
    "recfn.capture._tracer",
)
"""The modules mypyc compiles (their sources stay the pure build)."""

C_EXTENSIONS: Final = {
    "_crange": "the profiler's native rows and the C half of the range fast path",
    "_ccall": "the compiled range classes' call protocol: constructors, bound __enter__/__exit__, "
    "the decorator's wrapper",
    "_ctrace": "trace_calls' C hook",
    "_cchrome": "the Chrome reader's native decoder and one-pass nesting, the writer's complete "
    "events",
    "_csummary": "the out-of-core summary's one pass over a process's rows as recorded",
}
"""The C extensions in recfn/native/, built with the compiled modules, by what they do."""

GLUE_MYPYC_VERSIONS: Final = ("2.4.1",)
"""The mypyc versions whose class layout ``_ccall`` was checked against. It relies on facts of
mypyc's output (``__internal_mypyc_setup`` in a compiled class's dict, its method flags) that a
new mypyc may change; setup.py refuses to build the glue with any other version."""
