"""Build recfn: the hot modules of recfn/ are compiled with mypyc, and beside them trace_calls' C
profile hook (recfn/_ctrace.c), the Chrome trace reader's native decoder (recfn/_cchrome.c) and
the profiler's native rows (recfn/_crange.c) and the range classes' call protocol
(recfn/_ccall.c), unless RECFN_NO_MYPYC=1."""

import os

from setuptools import Extension, setup

COMPILED_MODULES = [
    "recfn/_engine.py",
    "recfn/_registry.py",
    "recfn/_recorder.py",
    "recfn/_stacks.py",
    "recfn/_tracer.py",
]

ext_modules = []
if os.environ.get("RECFN_NO_MYPYC", "") not in ("1", "true", "yes"):
    from mypyc.build import mypycify

    # Only the compiled modules must type-check for the build; their imports are followed silently.
    ext_modules = mypycify(
        ["--follow-imports=silent", *COMPILED_MODULES], opt_level="3", debug_level="1"
    )
    ext_modules += [
        Extension(f"recfn.{name}", [f"recfn/{name}.c"], extra_compile_args=["-O3", "-Wall"])
        for name in ("_ctrace", "_cchrome", "_crange", "_ccall")
    ]

setup(ext_modules=ext_modules)
