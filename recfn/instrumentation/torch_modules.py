"""``recfn.instrument_module``: a range per ``torch.nn.Module`` call, named by its path in the model.

torch is optional and imported only when this is called. Forward ranges come from forward
pre/post hooks (scope FUNCTION; the post hook is registered with ``always_call`` so an exception
still ends the range); backward ranges, when asked for, from full backward pre/post hooks (scope
BACKWARD_FUNCTION, ``forward_thread_id`` set to the thread that ran the forward).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Optional

from recfn.engine.ranges import (
    RecordFunction,
    begin_call,
    begin_range,
    current_thread_id,
    end_range,
)
from recfn.engine.ranges import (
    _reg as _registry,
)
from recfn.engine.scope import RecordScope
from recfn.errors import RecfnTypeError

FUNCTION = int(RecordScope.FUNCTION)
_instrumented: weakref.WeakSet[Any] = weakref.WeakSet()
_lock = threading.Lock()


class _Stacks(threading.local):
    """Per-thread stack of open forward ranges (forward calls nest, so pre/post hooks are LIFO)."""

    def __init__(self) -> None:
        self.forward: list[Optional[RecordFunction]] = []


class ModuleHooks:
    """The hooks ``instrument_module`` added; ``undo()`` (or leaving its ``with`` block) removes them.

    ``names`` maps each instrumented module's path to its range name.
    """

    def __init__(self, modules: list[Any], names: dict[str, str], hooks: list[Any]) -> None:
        self.names = names
        self._modules = modules
        self._hooks = hooks

    @property
    def active(self) -> bool:
        return bool(self._hooks)

    def undo(self) -> None:
        """Remove every hook (calling it again does nothing)."""
        hooks, self._hooks = self._hooks, []
        for hook in hooks:
            hook.remove()
        with _lock:
            for module in self._modules:
                _instrumented.discard(module)
        self._modules = []

    def __enter__(self) -> ModuleHooks:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.undo()

    def __repr__(self) -> str:
        state = "active" if self.active else "undone"
        return f"<recfn.ModuleHooks {len(self.names)} modules, {state}>"


class _ModuleRecorder:
    """The hook functions of one module: they know its range name and the stacks to use."""

    def __init__(self, name: str, input_shapes: bool, stacks: _Stacks) -> None:
        self.name = name
        self.input_shapes = input_shapes
        self.stacks = stacks
        self.forward_tid = 0
        self.backward: list[RecordFunction] = []

    def forward_pre(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        stack = self.stacks.forward
        if _registry.n_callbacks == 0:
            stack.append(None)
            return
        self.forward_tid = current_thread_id()
        if self.input_shapes:
            stack.append(begin_call(self.name, FUNCTION, args, kwargs))
        else:
            stack.append(begin_range(self.name, None, FUNCTION))

    def forward_post(
        self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any
    ) -> None:
        stack = self.stacks.forward
        rf = stack.pop() if stack else None
        if rf is not None:
            if rf.needs_outputs:
                rf.set_outputs(output)
            end_range(rf)

    def backward_pre(self, module: Any, grad_output: Any) -> None:
        if _registry.n_callbacks == 0:
            return
        rf = RecordFunction(RecordScope.BACKWARD_FUNCTION)
        if rf.is_active:
            rf.forward_thread_id = self.forward_tid
            rf.before(self.name + ".backward")
            self.backward.append(rf)

    def backward_post(self, module: Any, grad_input: Any, grad_output: Any) -> None:
        if self.backward:
            self.backward.pop().end()


def instrument_module(
    model: Any,
    input_shapes: bool = True,
    backward: bool = False,
    root_name: str = "model",
) -> ModuleHooks:
    """Record a range per call of ``model`` and of every submodule, named by path.

    Names look like ``model.encoder.layers.0.attn`` (``root_name`` is the first part). With
    ``input_shapes`` the forward's arguments are handed to callbacks that need inputs, so
    ``recfn.profile(report_input_shapes=True)`` records their shapes and dtypes. With
    ``backward`` each module's backward is a BACKWARD_FUNCTION range ``<name>.backward``
    carrying the forward's thread id (full backward hooks: modules doing in-place operations
    on their inputs cannot take them). Modules already instrumented are left as they are.
    """
    try:
        import torch
    except ImportError:
        raise ImportError("recfn.instrument_module needs torch (pip install torch)") from None
    if not isinstance(model, torch.nn.Module):
        raise RecfnTypeError(
            f"instrument_module expects a torch.nn.Module, got {type(model).__name__}"
        )
    if not isinstance(root_name, str) or not root_name:
        raise RecfnTypeError(f"root_name must be a non-empty str, got {root_name!r}")
    stacks = _Stacks()
    names: dict[str, str] = {}
    modules: list[Any] = []
    hooks: list[Any] = []
    with _lock:
        for path, module in model.named_modules():
            if module in _instrumented:
                continue
            name = f"{root_name}.{path}" if path else root_name
            rec = _ModuleRecorder(name, input_shapes, stacks)
            hooks.append(module.register_forward_pre_hook(rec.forward_pre, with_kwargs=True))
            hooks.append(
                module.register_forward_hook(rec.forward_post, with_kwargs=True, always_call=True)
            )
            if backward:
                hooks.append(module.register_full_backward_pre_hook(rec.backward_pre))
                hooks.append(module.register_full_backward_hook(rec.backward_post))
            _instrumented.add(module)
            modules.append(module)
            names[path] = name
    return ModuleHooks(modules, names, hooks)
