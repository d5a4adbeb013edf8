"""Text for tables: durations, byte counts and large counts in human units, and names made
safe to print."""

from __future__ import annotations

import math


def format_ns(ns: float) -> str:
    """A duration in nanoseconds as ``"812ns"``, ``"12.345us"``, ``"3.210ms"`` or ``"1.500s"``."""
    if math.isnan(ns):
        return "-"
    size = abs(ns)
    if size < 1e3:
        return f"{ns:.0f}ns"
    if size < 1e6:
        return f"{ns / 1e3:.3f}us"
    if size < 1e9:
        return f"{ns / 1e6:.3f}ms"
    return f"{ns / 1e9:.3f}s"


def format_bytes(count: float) -> str:
    """A (possibly negative) byte count in binary units: ``"512 B"``, ``"-1.50 MiB"``."""
    if math.isnan(count):
        return "-"
    size = abs(count)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{count / scale:.2f} {unit}"
    return f"{count:.0f} B"


def format_count(count: float) -> str:
    """A large count with an SI prefix: ``"950"``, ``"12.30K"``, ``"4.00G"``."""
    if math.isnan(count):
        return "-"
    size = abs(count)
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if size >= scale:
            return f"{count / scale:.2f}{unit}"
    return f"{count:.0f}"


def printable(text: str) -> str:
    """`text` with control characters (ESC, BEL, line breaks...) written as escapes such as
    ``\\x1b``: names are data, and must not drive the terminal that prints them."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)
