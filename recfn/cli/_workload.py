"""The toy workload ``recfn demo`` profiles: nested ranges on the main thread (a NumPy training loop
with input shapes and FLOPs), two plain worker threads, asyncio tasks that overlap, marks and
reported memory. Its own module, imported when the demo runs, so that the other subcommands start
without NumPy (`recfn.cli._main.quiet_blas`)."""

from __future__ import annotations

import asyncio
import json
import threading
import zlib

import numpy as np

import recfn

STEPS = 12
BATCH = 64
FEATURES = 128
HIDDEN = 256


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with recfn.record_function_fast("matmul", (a, b)):
        product: np.ndarray = a @ b
    return product


def relu(x: np.ndarray) -> np.ndarray:
    with recfn.record_function_fast("relu", (x,)):
        result: np.ndarray = np.maximum(x, 0.0)
    return result


@recfn.record_function("load_batch")
def load_batch(rng: np.random.Generator) -> np.ndarray:
    batch = rng.standard_normal((BATCH, FEATURES))
    recfn.report_memory_usage(int(batch.nbytes))
    return batch


def forward(x: np.ndarray, w1: np.ndarray, w2: np.ndarray) -> np.ndarray:
    with recfn.record_function("forward"):
        with recfn.record_function("layer1"):
            h = relu(matmul(x, w1))
        with recfn.record_function("layer2"):
            return matmul(h, w2)


def train(steps: int = STEPS, seed: int = 0) -> float:
    """A toy regression loop: the nested ranges of a training step."""
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((FEATURES, HIDDEN)) * 0.05
    w2 = rng.standard_normal((HIDDEN, 1)) * 0.05
    loss = 0.0
    for step in range(steps):
        with recfn.record_function("train_step", args=f"step={step}"):
            x = load_batch(rng)
            y = forward(x, w1, w2)
            with recfn.record_function("loss"):
                loss = float(np.mean((y - 1.0) ** 2))
            with recfn.record_function("update"):
                grad = matmul(x.T, np.repeat(y - 1.0, HIDDEN, axis=1)) / BATCH
                w1 -= 1e-3 * grad
        if step % 4 == 3:
            recfn.mark(f"checkpoint {step + 1}")
    return loss


def preprocess(worker: int, items: int = 40) -> int:
    """Work on a plain ``threading.Thread``: tokenize records, compress them (zlib releases the
    GIL, so the workers really overlap the training loop)."""
    payload = bytes(range(256)) * 256
    total = 0
    for i in range(items):
        with recfn.record_function("preprocess"):
            with recfn.record_function("tokenize"):
                words = (f"record {worker} {i} " * 20).split()
            with recfn.record_function("compress"):
                total += len(zlib.compress(payload + json.dumps(words).encode(), 6))
    return total


async def fetch(source: int) -> int:
    """An asyncio task; tasks overlap, each keeps its own parent chain."""
    async with recfn.record_function(f"fetch[{source}]"):
        await asyncio.sleep(0.002 * (source + 1))
        with recfn.record_function("parse"):
            return len(json.loads(json.dumps({"source": source, "rows": list(range(200))}))["rows"])


async def fetch_all(sources: int = 4) -> int:
    async with recfn.record_function("fetch_all"):
        return sum(await asyncio.gather(*(fetch(i) for i in range(sources))))


def workload() -> float:
    """The whole demo: two worker threads, a training loop and a burst of asyncio fetches."""
    with recfn.record_function("demo"):
        workers = [
            threading.Thread(target=preprocess, args=(i,), name=f"preprocess-{i}") for i in range(2)
        ]
        for thread in workers:
            thread.start()
        loss = train()
        asyncio.run(fetch_all())
        for thread in workers:
            thread.join()
    return loss
