"""Automatic instrumentation: ``instrument`` wraps a module's, class's or instance's callables
in ranges, ``instrument_module`` hooks torch modules' forwards, and ``codegen`` writes the same
wrappers as a reviewable module. (The folder is not called ``instrument``: that name is the
``recfn.instrument`` function.)"""

from __future__ import annotations

from recfn.instrumentation._instrument import (
    InstrumentHandle,
    add_to_skip_list,
    instrument,
    remove_from_skip_list,
    skip_list,
)
from recfn.instrumentation.torch_modules import ModuleHooks, instrument_module

__all__ = [
    "InstrumentHandle",
    "ModuleHooks",
    "add_to_skip_list",
    "instrument",
    "instrument_module",
    "remove_from_skip_list",
    "skip_list",
]
