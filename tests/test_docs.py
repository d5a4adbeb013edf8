"""Every relative link in the README, CHANGELOG, CONTRIBUTING and docs/ resolves.

A link resolves when the file or folder it names exists in the repository and, when it names an
anchor (``page.md#section``), the target page has a heading with that anchor, as GitHub makes
them. Links to web addresses are not followed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "CONTRIBUTING.md"]
    + list((ROOT / "docs").glob("*.md"))
)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:


def prose_lines(page: Path) -> list[str]:
    """The lines of ``page`` outside fenced code blocks."""
    lines: list[str] = []
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of ``page`` (repeated headings get -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in prose_lines(page):
        match = HEADING.match(line)
        if match is None:
            continue
        base = anchor(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """The relative links of ``page`` that leave ``root`` or name a missing path or heading."""
    broken: list[str] = []
    for line in prose_lines(page):
        for target in LINK.findall(line):
            if EXTERNAL.match(target):
                continue
            path_part, _, fragment = target.partition("#")
            resolved = (page.parent / path_part).resolve() if path_part else page
            if not resolved.is_relative_to(root):
                broken.append(f"{target}: outside the repository")
            elif not resolved.exists():
                broken.append(f"{target}: no such file")
            elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
                broken.append(f"{target}: no heading #{fragment} in {resolved.name}")
    return broken


def test_the_pages_exist() -> None:
    assert all(page.is_file() for page in PAGES), [str(p) for p in PAGES if not p.is_file()]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_resolve(page: Path) -> None:
    assert broken_links(page) == []


def test_the_checker_finds_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n[ok](#title) [missing](nothing.md) [bad anchor](#none)\n"
        "```\n[in code](ignored.md)\n```\n[web](https://example.org/x) [up](../x.md)\n",
        encoding="utf-8",
    )
    assert broken_links(page, root=tmp_path) == [
        "nothing.md: no such file",
        "#none: no heading #none in page.md",
        "../x.md: outside the repository",
    ]
