"""recfn.instrument_module on a small torch model (skipped when torch is missing)."""

from __future__ import annotations

import pytest

import recfn

torch = pytest.importorskip("torch")


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.act = torch.nn.Tanh()

    def forward(self, x):
        return self.act(self.lin(x))


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(Block(), torch.nn.Linear(3, 2))


def ranges(prof):
    return [r for r in prof.table.to_pylist() if r["kind"] == "range"]


def test_one_range_per_module_call_with_shapes_and_nesting() -> None:
    net = model()
    with recfn.instrument_module(net) as hooks, recfn.profile(report_input_shapes=True) as prof:
        net(torch.randn(5, 4))
        net(torch.randn(7, 4))
    assert hooks.names == {
        "": "model",
        "0": "model.0",
        "0.lin": "model.0.lin",
        "0.act": "model.0.act",
        "1": "model.1",
    }
    rows = ranges(prof)
    assert [("  " * r["depth"]) + r["name"] for r in rows[:5]] == [
        "model",
        "  model.0",
        "    model.0.lin",
        "    model.0.act",
        "  model.1",
    ]
    assert [r["input_shapes"] for r in rows[:5]] == [
        [[5, 4]],
        [[5, 4]],
        [[5, 4]],
        [[5, 3]],
        [[5, 3]],
    ]
    assert [r["input_shapes"][0][0] for r in rows[5:]] == [7] * 5
    assert {r["scope"] for r in rows} == {"function"}
    by_id = {r["id"]: r for r in rows}
    assert by_id[rows[2]["parent_id"]]["name"] == "model.0"
    assert not net._forward_pre_hooks and not net[0].lin._forward_hooks


def test_shapes_off_hands_no_inputs() -> None:
    net = model()
    seen = []
    cb = recfn.RecordFunctionCallback(lambda rf: seen.append(rf.inputs), needs_inputs=True)
    recfn.add_global_callback(cb)
    with recfn.instrument_module(net, input_shapes=False):
        net(torch.randn(2, 4))
    assert seen == [None] * 5


def test_exception_in_forward_still_ends_ranges() -> None:
    net = model()
    with recfn.instrument_module(net), recfn.profile() as prof:
        with pytest.raises(RuntimeError):
            net(torch.randn(2, 5))  # wrong width: Linear raises
        net(torch.randn(1, 4))
    rows = ranges(prof)
    assert all(r["end_ns"] is not None for r in rows)
    assert [r["name"] for r in rows if r["depth"] == 0] == ["model", "model"]


def test_backward_ranges_carry_forward_thread() -> None:
    net = model()
    x = torch.randn(3, 4, requires_grad=True)
    with recfn.instrument_module(net, backward=True, root_name="net"), recfn.profile() as prof:
        net(x).sum().backward()
    rows = ranges(prof)
    forward_tid = rows[0]["thread_id"]
    backward = [r for r in rows if r["scope"] == "backward_function"]
    assert sorted(r["name"] for r in backward) == sorted(
        [
            "net.backward",
            "net.0.backward",
            "net.0.lin.backward",
            "net.0.act.backward",
            "net.1.backward",
        ]
    )
    assert all(r["fwd_thread_id"] == forward_tid for r in backward)


def test_instrumenting_twice_hooks_once_and_undo_removes_all() -> None:
    net = model()
    first = recfn.instrument_module(net)
    second = recfn.instrument_module(net)
    assert second.names == {}
    with recfn.profile() as prof:
        net(torch.randn(1, 4))
    assert len(ranges(prof)) == 5
    first.undo()
    first.undo()
    assert all(not m._forward_pre_hooks and not m._forward_hooks for m in net.modules())
    with pytest.raises(TypeError, match="nn.Module"):
        recfn.instrument_module(object())
