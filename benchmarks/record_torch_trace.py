"""Record a real torch.profiler trace of a small training loop, for the Chrome readers' benchmarks.

Run: ``python benchmarks/record_torch_trace.py OUT.json`` (``--steps N``, default 5000: about 655k
events with torch 2.13; ``--shapes`` records with ``record_shapes=True``, ``--memory`` with
``profile_memory=True``). Needs torch (a CPU
build is enough); not a dependency of recfn. Each step runs a two-layer MLP forward, its backward
(torch links the two with "fwdbwd" flow events, one per 8 ops) and an SGD step; then
``python benchmarks/bench_chrome_read.py --trace OUT.json`` reads it.
"""

from __future__ import annotations

import argparse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the Chrome JSON trace to write")
    parser.add_argument("--steps", type=int, default=5000, help="training steps recorded")
    parser.add_argument("--shapes", action="store_true", help="record_shapes=True")
    parser.add_argument("--memory", action="store_true", help="profile_memory=True")
    args = parser.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with profile(
        activities=[ProfilerActivity.CPU], record_shapes=args.shapes, profile_memory=args.memory
    ) as recorded:
        for _ in range(args.steps):
            loss = model(torch.randn(8, 16)).softmax(-1).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    recorded.export_chrome_trace(args.out)


if __name__ == "__main__":
    main()
