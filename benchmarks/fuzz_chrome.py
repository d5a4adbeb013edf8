"""Mutation fuzzer for Chrome trace import: every mutated file loads or raises TraceFormatError.

Run: ``python benchmarks/fuzz_chrome.py --cases 5000 --seed 1`` (exits 1 if any case raised
another exception, or loaded silently wrong). Prints a Markdown table: mutation kind | tried |
refused | loaded | silently wrong | other exception.

Bases are a recfn-written trace (nested ranges, marks, memory events, an open range; as
``.json`` and ``.json.gz``), a torch.profiler trace (``tests/data/torch_trace.json``, cut) and a
hand-written trace with B/E pairs, counters and metadata. Mutations are structural (edit the
parsed JSON: delete keys, swap types, huge/negative/non-finite numbers, deep nesting, other
top-level types) or on bytes (truncate, flip bits, splice junk; in the gzip stream for ``.gz``).

"Silently wrong" is a loaded table that breaks an invariant the file cannot excuse: an end
before its start, a time outside every time the file states (a wrapped integer), a row whose
parent is not its enclosing range on its thread, or an id that is not unique. Chrome JSON has
no checksum, so a flipped digit that still parses is a different, valid trace: such loads count
as "loaded", not as wrong.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import math
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from recfn.formats.schema import IMPORTED_KINDS

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent
HOSTILE: list[Any] = [
    2**64 - 1,
    2**63,
    -(2**63) - 1,
    10**30,
    1e300,
    -1e300,
    1e19,
    -50,
    -1,
    0,
    0.5,
    "X",
    "",
    "1",
    ["X"],
    {"a": 1},
    None,
    True,
    [],
    {},
]
"""Values put in place of an event field."""
PHASES = ["X", "B", "E", "i", "I", "R", "C", "M", "s", "t", "f", "b", "e", "n", "S", "T", "p"]
PHASES += ["F", "P", "O", "N", "D", "V", "c", "?"]
FIELDS = ["ph", "name", "cat", "ts", "dur", "pid", "tid", "args", "id", "id2", "scope", "bp", "s"]


def bases(tmp: Path) -> dict[str, tuple[bytes, Any]]:
    """name -> (file bytes, parsed JSON) of the traces that are mutated."""
    import recfn

    with recfn.profile() as prof:
        for i in range(3):
            with recfn.record_function(f"outer{i}"):
                recfn.mark("tick")
                recfn.report_memory_usage(100 * (i + 1), "cpu")
                with recfn.record_function("inner"):
                    pass
    path = tmp / "recfn.json"
    prof.trace.save(path)
    written = path.read_bytes()
    torch = json.loads((ROOT / "tests" / "data" / "torch_trace.json").read_text())
    events = torch["traceEvents"] if isinstance(torch, dict) else torch
    torch_cut = {**torch, "traceEvents": events[:60]} if isinstance(torch, dict) else events[:60]
    hand = [
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": 7, "args": {"name": "Main"}},
        {"name": "outer", "cat": "user", "ph": "B", "pid": 1, "tid": 7, "ts": 0},
        {"name": "inner", "ph": "B", "pid": 1, "tid": 7, "ts": 1, "args": {"a": 1}},
        {"ph": "E", "pid": 1, "tid": 7, "ts": 2},
        {"name": "x", "ph": "X", "pid": 1, "tid": 7, "ts": 3, "dur": 1.5},
        {"ph": "E", "pid": 1, "tid": 7, "ts": 10},
        {"name": "tick", "ph": "i", "s": "t", "pid": 1, "tid": 7, "ts": 4},
        {"name": "mem", "ph": "C", "pid": 1, "ts": 1, "args": {"cpu": 100}},
        {"name": "flow", "ph": "s", "id": 1, "pid": 1, "tid": 7, "ts": 3},
    ]
    torch_bytes = json.dumps(torch_cut).encode()
    return {
        "recfn": (written, json.loads(written)),
        "torch": (torch_bytes, torch_cut),
        "hand": (json.dumps(hand).encode(), hand),
    }


def _events(document: Any) -> list[Any]:
    if isinstance(document, dict) and isinstance(document.get("traceEvents"), list):
        return list(document["traceEvents"])
    return document if isinstance(document, list) else []


def _with_events(document: Any, events: list[Any]) -> Any:
    if isinstance(document, dict):
        return {**document, "traceEvents": events}
    return events


def _edit_event(rng: random.Random, document: Any, edit: Callable[[dict[str, Any]], None]) -> Any:
    document = copy.deepcopy(document)
    events = _events(document)
    objects = [e for e in events if isinstance(e, dict)]
    if objects:
        edit(rng.choice(objects))
    return _with_events(document, events)


def _deep(depth: int) -> str:
    """A placeholder that `_dumps` writes as `depth` nested lists and objects (too deep for
    Python's json to write)."""
    return f"@deep{depth}@"


def _dumps(document: Any) -> bytes:
    text = json.dumps(document, allow_nan=True)
    for depth in (3, 50, 99, 101, 200, 1000):
        nested = '{"k":[' * (depth // 2) + "1" + "]}" * (depth // 2)
        text = text.replace(f'"{_deep(depth)}"', nested)
    return text.encode()


STRUCTURAL: dict[str, Callable[[random.Random, Any], bytes]] = {
    "delete key": lambda rng, doc: _dumps(
        _edit_event(rng, doc, lambda e: e.pop(rng.choice(list(e)), None) if e else None)
    ),
    "hostile value": lambda rng, doc: _dumps(
        _edit_event(rng, doc, lambda e: e.__setitem__(rng.choice(FIELDS), rng.choice(HOSTILE)))
    ),
    "non-finite number": lambda rng, doc: _dumps(
        _edit_event(
            rng,
            doc,
            lambda e: e.__setitem__(
                rng.choice(["ts", "dur", "pid", "tid"]),
                rng.choice([math.nan, math.inf, -math.inf]),
            ),
        )
    ),
    "other phase": lambda rng, doc: _dumps(
        _edit_event(rng, doc, lambda e: e.__setitem__("ph", rng.choice(PHASES)))
    ),
    "deep args": lambda rng, doc: _dumps(
        _edit_event(
            rng, doc, lambda e: e.__setitem__("args", {"d": _deep(rng.choice([50, 99, 101, 1000]))})
        )
    ),
    "deep field": lambda rng, doc: _dumps(
        _edit_event(
            rng, doc, lambda e: e.__setitem__(rng.choice(FIELDS), _deep(rng.choice([3, 200, 1000])))
        )
    ),
    "non-object event": lambda rng, doc: _dumps(
        _with_events(doc, [*_events(doc), rng.choice([1, "x", None, [], [1, 2]])])
    ),
    "top-level type": lambda rng, doc: _dumps(
        rng.choice(
            [
                1,
                "trace",
                None,
                {"traceEvents": rng.choice([1, "x", None, {}, {"a": []}])},
                {"traceEvents": _events(doc), "baseTimeNanoseconds": rng.choice(HOSTILE)},
                {"other": _events(doc)},
            ]
        )
    ),
    "duplicate and shuffle": lambda rng, doc: _dumps(
        _with_events(doc, rng.sample(_events(doc) * 2, len(_events(doc)) * 2))
    ),
}


def _bytes_mutation(kind: str, rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    if kind == "truncate":
        return data[: rng.randrange(len(data))]
    if kind == "bit flip":
        out = bytearray(data)
        for _ in range(rng.choice([1, 1, 2, 8])):
            i = rng.randrange(len(out))
            out[i] ^= 1 << rng.randrange(8)
        return bytes(out)
    if kind == "splice junk":
        i = rng.randrange(len(data))
        junk = rng.choice([b"\xff\xfe", b"\x00", b"]", b"}", b"[[[[", b"1e999", b'"\\ud800"', b","])
        return data[:i] + junk + data[i:]
    raise AssertionError(kind)


BYTES_KINDS = ("truncate", "bit flip", "splice junk")


def make_case(
    rng: random.Random, bases_: dict[str, tuple[bytes, Any]], *, bomb_mib: int = 64
) -> tuple[str, str, bytes]:
    """(mutation kind, file suffix, file bytes) of one case; gzip bombs inflate to at most
    `bomb_mib` MiB."""
    base = rng.choice(sorted(bases_))
    data, document = bases_[base]
    kinds = [*STRUCTURAL, *BYTES_KINDS, *(f"gzip {k}" for k in BYTES_KINDS), "gzip bomb"]
    kind = rng.choice(kinds)
    if kind in STRUCTURAL:
        return kind, ".json", STRUCTURAL[kind](rng, document)
    if kind in BYTES_KINDS:
        return kind, ".json", _bytes_mutation(kind, rng, data)
    if kind == "gzip bomb":
        return (
            kind,
            ".json.gz",
            gzip.compress(b"[" + b" " * (rng.randint(1, bomb_mib) << 20) + b"]"),
        )
    return kind, ".json.gz", _bytes_mutation(kind[5:], rng, gzip.compress(data))


def silently_wrong(df: Any) -> str | None:
    """What invariant a loaded table breaks, or None."""
    import numpy as np

    for column in ("name", "scope", "thread_name", "args"):
        if column in df.columns:
            try:
                df[column].astype(object).tolist()
            except Exception as exc:  # any failure to read a value back
                return f"{column} unreadable: {type(exc).__name__}"
    if df["id"].duplicated().any():
        return "duplicate ids"
    start = df["start_ns"].to_numpy(dtype=np.int64)
    end = df["end_ns"]
    closed = end.notna().to_numpy()
    if (end[closed].to_numpy(dtype=np.int64) < start[closed]).any():
        return "end before start"
    if len(start) and (start.min() < -(2**62) or start.max() > 2**62):
        return "time wrapped"
    by_id = dict(zip(df["id"].tolist(), range(len(df))))
    if "kind" in df.columns and not set(df["kind"].astype(str)) <= set(IMPORTED_KINDS):
        return "unknown kind"
    parents = df["parent_id"]
    for row in np.flatnonzero(parents.notna().to_numpy()).tolist():
        parent = int(parents.iat[row])
        p = by_id.get(parent)
        if p is None:
            return "dangling parent"
        if df["thread_id"].iat[p] != df["thread_id"].iat[row] or start[p] > start[row]:
            return "parent does not enclose"
    return None


def round_trip_differs(df: Any, path: Path) -> str | None:
    """What a loaded table loses when written as Chrome JSON and read back (rows by name,
    kind, times and async flag), or None."""
    import warnings

    import recfn

    def rows(frame: Any) -> list[tuple[Any, ...]]:
        ends = frame["end_ns"].astype(object).where(frame["end_ns"].notna(), None)
        return sorted(
            zip(
                frame["name"].astype(str),
                frame["kind"].astype(str),
                frame["start_ns"].tolist(),
                ends.tolist(),
                frame["is_async"].tolist(),
            ),
            key=repr,
        )

    recfn.Trace.from_pandas(df.copy()).save(path, overwrite=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        back = recfn.load(path, as_pandas=True)
    if rows(back) != rows(df):
        return "a Chrome round trip changed its rows"
    return None


def run(cases: int, seed: int, *, quiet: bool = False) -> tuple[dict[str, Counter[str]], list[str]]:
    """Run `cases` cases; returns per-kind outcome counts and descriptions of failures."""
    import recfn
    from recfn.errors import TraceFormatError

    rng = random.Random(seed)
    table: dict[str, Counter[str]] = {}
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        bases_ = bases(tmp)
        for case in range(cases):
            kind, suffix, data = make_case(rng, bases_)
            path = tmp / f"case{case % 8}{suffix}"
            path.write_bytes(data)
            outcome = table.setdefault(kind, Counter())
            outcome["tried"] += 1
            try:
                df = recfn.load(path, as_pandas=True)
            except TraceFormatError as exc:
                outcome["refused"] += 1
                if "not a readable Chrome trace (" in str(exc):  # the reader's safety net
                    failures.append(f"case {case} ({kind}): refused by the safety net: {exc}")
                if path.name not in str(exc):
                    failures.append(f"case {case} ({kind}): message lacks the file: {exc}")
                    outcome["other"] += 1
                continue
            except Exception as exc:
                outcome["other"] += 1
                failures.append(f"case {case} ({kind}): {type(exc).__name__}: {exc}"[:300])
                if not quiet:
                    (tmp.parent / f"recfn-fuzz-{seed}-{case}{suffix}").write_bytes(data)
                continue
            wrong = silently_wrong(df) or round_trip_differs(df, tmp / f"back{case % 8}.json")
            if wrong:
                outcome["wrong"] += 1
                failures.append(f"case {case} ({kind}): loaded silently wrong: {wrong}")
            else:
                outcome["loaded"] += 1
    return table, failures


def markdown(table: dict[str, Counter[str]]) -> str:
    lines = [
        "| mutation | tried | refused | loaded | silently wrong | other exception |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    total: Counter[str] = Counter()
    for kind in sorted(table):
        c = table[kind]
        total.update(c)
        lines.append(
            f"| {kind} | {c['tried']} | {c['refused']} | {c['loaded']} | {c['wrong']} | {c['other']} |"
        )
    lines.append(
        f"| **all** | {total['tried']} | {total['refused']} | {total['loaded']} | "
        f"{total['wrong']} | {total['other']} |"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    began = time.perf_counter()
    table, failures = run(args.cases, args.seed)
    print(markdown(table))
    print(f"\n{args.cases} cases, seed {args.seed}, {time.perf_counter() - began:.0f} s")
    for failure in failures[:50]:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
