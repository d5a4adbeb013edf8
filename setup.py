"""Build recfn: the hot modules of recfn/ are compiled with mypyc unless RECFN_NO_MYPYC=1."""

import os

from setuptools import setup

COMPILED_MODULES = [
    "recfn/_engine.py",
    "recfn/_recorder.py",
    "recfn/_tracer.py",
]

ext_modules = []
if os.environ.get("RECFN_NO_MYPYC", "") not in ("1", "true", "yes"):
    from mypyc.build import mypycify

    ext_modules = mypycify(COMPILED_MODULES, opt_level="3", debug_level="1")

setup(ext_modules=ext_modules)
