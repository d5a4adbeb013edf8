"""A small table of strings (a summary laid out for reading) as HTML and as aligned text, the
same bytes as pandas' ``to_html(index=False, border=0, escape=True)`` and
``to_string(index=False)`` of a frame of those strings, without making the frame: for the few
rows a notebook shows, pandas' formatting machinery cost more than the summary itself.
"""

from __future__ import annotations

from dataclasses import dataclass

_TEXT_ESCAPES = str.maketrans({"\t": "\\t", "\n": "\\n", "\r": "\\r"})
"""What pandas escapes in a cell, as text and in HTML."""
_HTML_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
"""What pandas' ``to_html(escape=True)`` escapes besides (quotes are left as they are)."""


@dataclass(frozen=True)
class TextTable:
    """`titles` and, per title, its column's cells (all columns of equal length)."""

    titles: list[str]
    columns: list[list[str]]

    @property
    def rows(self) -> int:
        return len(self.columns[0]) if self.columns else 0

    def html(self, classes: str) -> str:
        """The table as pandas writes a frame of these strings (``index=False``, ``border=0``,
        ``escape=True``, ``classes``): cells escaped, stripped of surrounding whitespace, and
        their runs of spaces kept (``&nbsp;``)."""
        parts = [f'<table class="dataframe {classes}">\n  <thead>\n']
        parts.append('    <tr style="text-align: right;">\n')
        parts.extend(f"      <th>{_html_cell(title)}</th>\n" for title in self.titles)
        parts.append("    </tr>\n  </thead>\n  <tbody>\n")
        for row in zip(*self.columns):
            parts.append("    <tr>\n")
            parts.extend(f"      <td>{_html_cell(cell)}</td>\n" for cell in row)
            parts.append("    </tr>\n")
        parts.append("  </tbody>\n</table>")
        return "".join(parts)

    def text(self) -> str:
        """The table as aligned text, as pandas writes a frame of these strings
        (``index=False``): every column right-aligned to its widest cell or title, one space
        between columns."""
        if not self.rows:
            return f"Empty DataFrame\nColumns: [{', '.join(self.titles)}]\nIndex: []"
        aligned = []
        for title, cells in zip(self.titles, self.columns):
            texts = [cell.translate(_TEXT_ESCAPES) for cell in cells]
            width = max(len(title), *(len(text) for text in texts))
            aligned.append([title.rjust(width), *(text.rjust(width) for text in texts)])
        return "\n".join(" ".join(line) for line in zip(*aligned))


def _html_cell(text: str) -> str:
    cell = text.translate(_TEXT_ESCAPES).translate(_HTML_ESCAPES).strip()
    return cell.replace("  ", "&nbsp;&nbsp;")
