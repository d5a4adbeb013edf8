"""Helpers for the instrumentation and tracing tests: synthetic modules and a callback that logs
ranges."""

from __future__ import annotations

import textwrap
import types

import recfn


def make_module(name: str, source: str) -> types.ModuleType:
    """A fresh module named ``name`` whose namespace ``source`` fills."""
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    exec(compile(textwrap.dedent(source), f"<{name}>", "exec"), vars(module))
    return module


class Names:
    """A global callback logging each range start/end, its inputs and outputs (``with Names() as n:``)."""

    def __init__(self, **options: object) -> None:
        self.events: list[tuple[str, str]] = []
        self.inputs: list[object] = []
        self.outputs: list[object] = []
        self.cb = recfn.RecordFunctionCallback(self.start, self.end, **options)  # type: ignore[arg-type]
        self.handle = 0

    def start(self, rf: recfn.RecordFunction) -> None:
        self.events.append(("start", rf.name))
        self.inputs.append((rf.inputs, rf.kwinputs))

    def end(self, rf: recfn.RecordFunction, ctx: object) -> None:
        self.events.append(("end", rf.name))
        self.outputs.append(rf.outputs)

    def __enter__(self) -> Names:
        self.handle = recfn.add_global_callback(self.cb)
        return self

    def __exit__(self, *exc: object) -> None:
        recfn.remove_callback(self.handle)

    @property
    def started(self) -> list[str]:
        return [name for event, name in self.events if event == "start"]
