"""The HTML stand-in for the interactive view and the per-cell output budget."""

from __future__ import annotations

import base64
import functools
import gzip
import html as html_text
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

import recfn
from recfn.analysis.synthetic import make_synthetic_trace
from recfn.formats.trace import Trace
from recfn.notebook_ext import fallback
from recfn.notebook_ext.display import bundle_size
from recfn.notebook_ext.export import chrome_gz, denser
from recfn.notebook_ext.fallback import FAST_GZIP_LEVEL, PERFETTO_ORIGIN, fallback_html
from recfn.notebook_ext.sessions import current_session

PLAIN_CELL = """\
def leaf(n):
    return sum(range(n))

def work():
    return [leaf(1000) for _ in range(5)]

work()
"""
LINK = re.compile(r'download="([^"]+)" href="data:application/gzip;base64,([^"]+)"')


def fallbacks(run: Any) -> list[str]:
    return [html for html in run.mime("text/html") if "recfn-fallback" in html]


def test_the_stand_in_has_description_call_tree_and_a_trace_that_loads_back(shell, tmp_path):
    run = shell.run(f"%%record_function plain --var df\n{PLAIN_CELL}")
    assert run.error is None
    [html] = fallbacks(run)
    assert "Timeline of plain:" in html  # the picture's description
    assert "<summary><b>Call tree of plain</b>" in html
    assert "__main__::work" in html and "__main__::leaf" in html and "5&#215;" in html
    name, payload = LINK.search(html).groups()  # type: ignore[union-attr]
    assert name == "plain.json.gz"
    path = tmp_path / name
    path.write_bytes(base64.b64decode(payload))
    loaded = recfn.load(path, as_pandas=True)
    names = lambda df: sorted(map(str, df.loc[df["kind"] == "range", "name"]))  # noqa: E731
    assert names(loaded) == names(shell.ns["df"].to_pandas())
    written = gzip.decompress(chrome_gz(shell.ns["df"]))  # what `recfn convert` writes
    assert gzip.decompress(base64.b64decode(payload)) == written
    assert "Open in Perfetto" in html and f'"{PERFETTO_ORIGIN}"' in html and "PING" in html


def total_output(run: Any) -> int:
    return sum(bundle_size(data) for data in run.outputs)


@functools.cache
def big_trace() -> Trace:
    frame = make_synthetic_trace(150_000, 3, seed=2, n_memory_events=1_500)
    return Trace(pa.Table.from_pandas(frame, preserve_index=False), name="big")


def test_a_large_trace_stays_within_the_output_budget(shell):
    current_session().add(big_trace())
    run = shell.run("%record_function --last")
    assert run.error is None
    assert 60_000 < total_output(run) <= 1_000_000  # so the 60 kB budget below must cut
    [html] = fallbacks(run)
    assert "too large to embed" in html and "data:application/gzip" not in html
    assert "Call tree of big" in html
    assert run.mime("image/png")

    run = shell.run("%record_function --last --max-output-bytes 60000")
    assert run.error is None and total_output(run) <= 60_000
    assert not run.mime("image/png") and "picture left out" in run.stderr


def test_a_file_that_fits_only_compressed_harder_is_embedded_so():
    # The stand-in compresses fast first; when that misses the room by less than what level 6
    # saves, the embedded file is the level-6 one, with the same JSON.
    frame = make_synthetic_trace(3_000, 2, seed=5)
    trace = Trace(pa.Table.from_pandas(frame, preserve_index=False), name="mid")
    fast = chrome_gz(trace, FAST_GZIP_LEVEL)
    dense = denser(fast)
    assert len(dense) < 0.9 * len(fast)
    room = 4 * ((len(dense) + 2) // 3) + len(fallback._PERFETTO_JS) + 900
    assert fallback._fits(dense, room) and not fallback._fits(fast, room)
    links = {}
    for label, given_room in (("dense", room), ("fast", 2 * room)):
        html = fallback._actions_html(trace, given_room, None, lambda: fast)
        [(_, payload)] = LINK.findall(html)
        links[label] = base64.b64decode(payload)
    assert links["fast"] == fast and links["dense"] == dense
    assert gzip.decompress(dense) == gzip.decompress(fast)
    html = fallback._actions_html(trace, room - 200, None, lambda: fast)
    assert "too large to embed" in html and not LINK.findall(html)


def test_a_saved_trace_is_linked_when_it_does_not_fit(tmp_path: Path):
    html = fallback_html(big_trace(), 200_000, saved_path="runs/big.json.gz")
    assert 'href="runs/big.json.gz"' in html


def test_bad_budget_is_a_usage_error(shell):
    run = shell.run("%%record_function --max-output-bytes 0\nran = True")
    assert run.error is not None and "must be positive" in str(run.error)


@functools.cache
def small_trace() -> Trace:
    with recfn.profile(trace_calls=True) as prof:
        exec(PLAIN_CELL, {})
    return Trace(prof.table, name="small")


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=200_000))
def test_the_stand_in_never_exceeds_its_budget(budget: int):
    html = fallback_html(small_trace(), budget)
    assert len(html.encode()) <= budget


@given(st.text(max_size=50))
def test_utf8_size_is_the_length_of_the_utf8_encoding(text: str) -> None:
    assert fallback.utf8_size(text) == len(text.encode())
    assert fallback.utf8_size("data:" + "A" * 1000 + text) == len(
        ("data:" + "A" * 1000 + text).encode()
    )


def test_the_stand_in_is_ascii_whatever_the_names(shell):
    """Non-ASCII names, units and signs are character references (one character past Latin-1
    would make the whole stand-in, base64 and all, a two-byte string); the page shows them."""
    cell = "def naïve_函数():\n    return sum(range(100))\n\nfor _ in range(3):\n    naïve_函数()\n"
    run = shell.run(f"%%record_function названия\n{cell}")
    assert run.error is None
    [page] = fallbacks(run)
    assert [c for c in page if not c.isascii()] == []
    shown = html_text.unescape(page)
    assert "Call tree of названия" in shown
    assert "naïve_函数" in shown and "3×" in shown
    assert "opening the Perfetto UI\\u2026" in page  # the script's own escape
