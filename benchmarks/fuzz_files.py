"""Corruption campaign over saved traces: every damaged file must load exactly or be refused.

Run: ``python benchmarks/fuzz_files.py --cases 6000 --seed 1`` (``--format parquet|all``). A
realistic trace is saved once; each case applies one mutation to its bytes (truncation, bit
flips, byte overwrites, chunk deletions and duplications), writes the result and calls
``recfn.load``. The outcome is *refused* (``TraceFormatError``), *exact* (the same table and
metadata as the original), *silently wrong* (it loaded, but differs) or *other exception*.
Prints a markdown table per mutation kind and exits 1 when any case was silently wrong or
raised another exception (the first few are printed).

A format is a ``Format``: a suffix, a function that builds the original file's bytes, and
mutators (``(data, rng) -> bytes``). Another format plugs in by adding an entry to ``FORMATS``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

import recfn
from recfn import TraceFormatError

Mutator = Callable[[bytes, random.Random], bytes]
OUTCOMES = ("refused", "exact", "silently wrong", "other exception")


@dataclass(frozen=True)
class Format:
    suffix: str
    make: Callable[[str], None]
    """Write the original trace at the given path."""
    mutators: dict[str, Mutator]


def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data))]


def flip_bit(data: bytes, rng: random.Random) -> bytes:
    return flip_bits(data, rng, 1)


def flip_bits(data: bytes, rng: random.Random, count: int = 0) -> bytes:
    out = bytearray(data)
    for _ in range(count or rng.randint(2, 16)):
        position = rng.randrange(len(out) * 8)
        out[position // 8] ^= 1 << (position % 8)
    return bytes(out)


def flip_tail_bit(data: bytes, rng: random.Random) -> bytes:
    """A bit flip in the last 4 KiB: the footer, its metadata and the last pages."""
    out = bytearray(data)
    position = len(out) * 8 - 1 - rng.randrange(min(len(out), 4096) * 8)
    out[position // 8] ^= 1 << (position % 8)
    return bytes(out)


def overwrite(data: bytes, rng: random.Random) -> bytes:
    size = rng.randint(1, 64)
    at = rng.randrange(len(data))
    return data[:at] + rng.randbytes(size)[: len(data) - at] + data[at + size :]


def delete_chunk(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data))
    return data[:at] + data[at + rng.randint(1, 256) :]


def duplicate_chunk(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data))
    return data[:at] + data[at : at + rng.randint(1, 256)] + data[at:]


BYTE_MUTATORS: dict[str, Mutator] = {
    "truncation": truncate,
    "bit flip": flip_bit,
    "bit flip in the last 4 KiB": flip_tail_bit,
    "2-16 bit flips": flip_bits,
    "byte overwrite (1-64)": overwrite,
    "chunk deletion (1-256)": delete_chunk,
    "chunk duplication (1-256)": duplicate_chunk,
}


def make_trace(path: str) -> None:
    """About 100 KB of Parquet: every column kind (dictionaries, nullable ints, lists, strings)."""
    with recfn.profile(report_input_shapes=True, with_stack=True, profile_memory=True) as prof:
        for step in range(1400):
            with recfn.record_function("train_step", args=f"step={step}"):
                with recfn.record_function_fast("aten::mm", [np.ones((2, step % 5 + 1))]):
                    recfn.report_memory_usage(64 * step, "cpu")
                with recfn.record_function("optimizer.step"):
                    recfn.mark("checkpoint")
    prof.save(path)


FORMATS: dict[str, Format] = {"parquet": Format(".parquet", make_trace, BYTE_MUTATORS)}


def same(loaded: pa.Table, original: pa.Table) -> bool:
    return loaded.equals(original) and loaded.schema.equals(original.schema, check_metadata=True)


def campaign(fmt: Format, cases: int, seed: int, folder: str) -> tuple[Counter, list[str]]:
    original_path = os.path.join(folder, "original" + fmt.suffix)
    fmt.make(original_path)
    with open(original_path, "rb") as fh:
        data = fh.read()
    original = recfn.load(original_path).table
    rng = random.Random(seed)
    kinds = list(fmt.mutators)
    counts: Counter = Counter()
    problems: list[str] = []
    path = os.path.join(folder, "case" + fmt.suffix)
    for case in range(cases):
        kind = kinds[case % len(kinds)]
        mutated = fmt.mutators[kind](data, rng)
        if mutated == data:
            counts[kind, "unchanged"] += 1
            continue
        with open(path, "wb") as fh:
            fh.write(mutated)
        try:
            loaded = recfn.load(path).table
        except TraceFormatError:
            outcome = "refused"
        except Exception:
            outcome = "other exception"
            problems.append(f"case {case} ({kind}): {traceback.format_exc(limit=-3)}")
        else:
            outcome = "exact" if same(loaded, original) else "silently wrong"
            if outcome == "silently wrong":
                problems.append(f"case {case} ({kind}): loaded a different table")
        counts[kind, outcome] += 1
    counts["size", "bytes"] = len(data)
    return counts, problems


def report(name: str, fmt: Format, counts: Counter) -> str:
    lines = [
        f"{name}: original {counts['size', 'bytes']:,} bytes",
        "",
        "| mutation kind | tried | refused (TraceFormatError) | round-tripped exactly "
        "| silently wrong | other exception |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    total: Counter = Counter()
    for kind in fmt.mutators:
        row = [counts[kind, outcome] for outcome in OUTCOMES]
        total.update(dict(zip(OUTCOMES, row)))
        lines.append(f"| {kind} | {sum(row):,} | " + " | ".join(f"{v:,}" for v in row) + " |")
    row = [total[outcome] for outcome in OUTCOMES]
    lines.append(f"| **all** | {sum(row):,} | " + " | ".join(f"{v:,}" for v in row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=5000, help="mutations per format")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--format", choices=[*FORMATS, "all"], default="all")
    args = parser.parse_args(argv)
    failed = False
    names = list(FORMATS) if args.format == "all" else [args.format]
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            counts, problems = campaign(FORMATS[name], args.cases, args.seed, folder)
            print(report(name, FORMATS[name], counts), end="\n\n")
            for problem in problems[:5]:
                print(problem, file=sys.stderr)
            failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
