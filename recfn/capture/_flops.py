"""FLOP formulas by range name, used by ``profile(with_flops=True)``; users can add their own."""

from __future__ import annotations

import math
from collections.abc import Callable

from recfn.errors import RecfnTypeError

FlopFormula = Callable[[list[list[int]]], int]

_formulas: dict[str, FlopFormula] = {}


def register_flops(name: str, formula: FlopFormula) -> None:
    """Count FLOPs for ranges called ``name`` from their input shapes (a list of int lists)."""
    if not isinstance(name, str) or not name:
        raise RecfnTypeError(f"register_flops name must be a non-empty str, got {name!r}")
    if not callable(formula):
        raise RecfnTypeError(
            f"register_flops formula must be callable, got {type(formula).__name__}"
        )
    _formulas[name] = formula


def unregister_flops(name: str) -> None:
    """Forget the formula for ``name`` (KeyError if there is none)."""
    del _formulas[name]


def flop_formulas() -> dict[str, FlopFormula]:
    """A snapshot of the registry (name -> formula)."""
    return dict(_formulas)


def _matmul(shapes: list[list[int]]) -> int:
    a, b = shapes[0], shapes[1]
    batch = math.prod(a[:-2]) if len(a) > 2 else 1
    m = a[-2] if len(a) >= 2 else 1
    k = a[-1]
    n = b[-1] if len(b) >= 2 else 1
    return 2 * batch * m * n * k


def _addmm(shapes: list[list[int]]) -> int:
    return _matmul(shapes[1:3]) + math.prod(shapes[0])


def _linear(shapes: list[list[int]]) -> int:
    x, weight = shapes[0], shapes[1]  # weight is [out_features, in_features]
    return 2 * math.prod(x[:-1]) * weight[0] * weight[1]


def _conv(shapes: list[list[int]]) -> int:
    x, w = shapes[0], shapes[1]
    # 2 * (output elements) * (in_channels/groups * kernel volume); output size approximated
    # by the input's spatial size (stride 1, "same" padding).
    batch, spatial = x[0], math.prod(x[2:])
    out_channels, kernel = w[0], math.prod(w[1:])
    return 2 * batch * out_channels * spatial * kernel


def _elementwise(shapes: list[list[int]]) -> int:
    return max((math.prod(s) for s in shapes), default=0)


for _name in (
    "matmul",
    "mm",
    "bmm",
    "aten::mm",
    "aten::bmm",
    "aten::matmul",
    "np.matmul",
    "numpy.matmul",
):
    register_flops(_name, _matmul)
for _name in ("addmm", "aten::addmm"):
    register_flops(_name, _addmm)
for _name in ("linear", "aten::linear"):
    register_flops(_name, _linear)
for _name in ("conv1d", "conv2d", "conv3d", "aten::conv1d", "aten::conv2d", "aten::conv3d"):
    register_flops(_name, _conv)
for _name in ("add", "mul", "sub", "div", "aten::add", "aten::mul", "aten::sub", "aten::div"):
    register_flops(_name, _elementwise)
