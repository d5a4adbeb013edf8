"""Chrome times (``ts``/``dur``: microseconds, as decimal JSON numbers) as exact int64
nanoseconds, and back.

A double cannot hold every nanosecond of a large time: microseconds since the epoch
(``1700000000123456.789``) have 19 significant digits. So times are never converted through
float64 nanoseconds. A time below `CHROME_EXACT_US` microseconds in magnitude (about 101 days)
is read from its nearest double ``f`` as ``floor(f) * 1000 + rint((f - floor(f)) * 1000)``, which
gives every whole number of nanoseconds exactly (the doubles there are less than a nanosecond
apart); a larger one from its digits (`exact_ns`), rounded half to even. The native decoder
(``recfn/native/_cchrome.c``, ``to_ns``) computes the same from the same text.

Times are int64 arrays with two values that are not times: `NO_TIME` (absent or null) and
`BEYOND` (a number whose nanoseconds int64 cannot hold; refused where an event needs it).
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from typing import Any, Final

import msgspec
import numpy as np

from recfn.errors import TraceFormatError
from recfn.formats.columns import INT64_MAX, INT64_MIN
from recfn.native.constants import CHROME_EXACT_US

NO_TIME: Final = int(INT64_MIN)
"""An event without this time (absent, or null)."""
BEYOND: Final = int(INT64_MIN) + 1
"""A time whose nanoseconds do not fit int64."""
LARGE: Final = float(CHROME_EXACT_US)

_SHAPE: Final = bytes(
    ord("0") if c in b"0123456789" else ord("e") if c in b"eE" else ord(" ") for c in range(256)
)
"""Translates digits to ``0``, ``e`` and ``E`` to ``e`` and every other byte to a space."""
_SPAN: Final = 16 << 20
"""Bytes of text translated at a time by `may_be_large`."""


def may_be_large(text: bytes | bytearray, span: int = _SPAN) -> bool:
    """Whether `text` may hold a number of `LARGE` microseconds or more: 13 digits in a row, or
    a digit followed by an exponent. A translation and two substring searches, about 12x faster
    than a regular expression that scans each digit run from every digit of it (which took 60%
    of a pure install's read of a torch trace); `span` bytes at a time, overlapping by 12, so
    that no copy of a whole file is made."""
    for at in range(0, len(text), span):
        shape = text[at : at + span + 12].translate(_SHAPE)
        if b"0000000000000" in shape or b"0e" in shape:
            return True
    return False


class _Times(msgspec.Struct, gc=False):
    """An event's times as JSON text; every other field is skipped."""

    ts: msgspec.Raw = msgspec.Raw(b"null")
    dur: msgspec.Raw = msgspec.Raw(b"null")


class _Document(msgspec.Struct, gc=False):
    traceEvents: list[_Times]


TIMES = msgspec.json.Decoder(list[_Times])
DOCUMENT_TIMES = msgspec.json.Decoder(_Document | list[_Times])


def exact_times(
    events: list[Any], text: bytes | bytearray, read: Callable[[], Any] | None = None
) -> list[Any]:
    """`events` (decoded from `text` with floats for ``ts`` and ``dur``: `Event` structs or
    dicts) with each float time of `LARGE` microseconds or more replaced by the
    ``decimal.Decimal`` of its text: the float has lost nanoseconds there. `read` gives the
    times of `text` (default: `TIMES` for a JSON list of events); where it cannot (events that
    are not objects, refused later), the events are left as they are."""
    if not events or not may_be_large(text):
        return events
    large = [i for i, e in enumerate(events) if _large(_field(e, "ts")) or _large(_field(e, "dur"))]
    if not large:
        return events
    try:
        document = TIMES.decode(text) if read is None else read()
    except (msgspec.ValidationError, msgspec.DecodeError, TraceFormatError):
        return events
    times = document.traceEvents if isinstance(document, _Document) else document
    if len(times) != len(events):
        return events
    for i in large:
        for key in ("ts", "dur"):
            if _large(_field(events[i], key)):
                _set(events[i], key, decimal.Decimal(bytes(getattr(times[i], key)).decode()))
    return events


def _field(event: Any, key: str) -> Any:
    return event.get(key) if isinstance(event, dict) else getattr(event, key, None)


def _set(event: Any, key: str, value: Any) -> None:
    if isinstance(event, dict):
        event[key] = value
    else:
        setattr(event, key, value)


def _large(value: Any) -> bool:
    return value.__class__ is float and not -LARGE < value < LARGE


def nanoseconds(values: list[Any], key: str, source: str) -> np.ndarray:
    """Times (`FIELD_TYPES`-checked numbers: floats, ints, Decimals from `exact_times`; None
    when absent) as int64 nanoseconds, `NO_TIME` for None, `BEYOND` where int64 cannot hold
    them; TraceFormatError for numbers that are not finite or do not fit a float."""
    try:
        floats = np.fromiter(values, dtype=np.float64, count=len(values))
    except OverflowError:
        raise TraceFormatError(f"{source}: an event's {key} is too large a number") from None
    if np.isinf(floats).any():
        raise TraceFormatError(f"{source}: an event's {key} is not finite")
    absent = np.isnan(floats)
    small = np.abs(floats) < LARGE  # False for NaN
    out = np.full(len(values), NO_TIME, dtype=np.int64)
    whole = np.floor(floats[small])
    out[small] = whole.astype(np.int64) * 1000 + np.rint((floats[small] - whole) * 1000.0).astype(
        np.int64
    )
    redo = ~small & ~absent
    if not set(map(type, values)) <= {float, type(None)}:  # ints and Decimals: exactly
        redo |= ~absent & np.fromiter(
            (v.__class__ is not float for v in values), dtype=bool, count=len(values)
        )
    for i in np.flatnonzero(redo).tolist():
        out[i] = _exact(values[i])
    return out


def _exact(value: Any) -> int:
    """The nanoseconds of a number of microseconds, rounded half to even; `BEYOND` where int64
    cannot hold them."""
    if value.__class__ is float:
        value = decimal.Decimal(value)  # a large float without its text: its exact value
    elif not isinstance(value, decimal.Decimal):
        value = decimal.Decimal(int(value))
    return exact_ns(value)


def exact_ns(value: decimal.Decimal) -> int:
    """`value` microseconds times 1000, rounded half to even, as int64 nanoseconds (`BEYOND`
    outside (INT64_MIN + 1, INT64_MAX]); the native decoder's ``exact_ns`` does the same with the
    digits it reads."""
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):  # NaN or infinity: JSON has none
        return BEYOND
    mantissa = int("".join(map(str, digits))) if digits else 0
    scale = exponent + 3  # nanoseconds = mantissa * 10**scale
    if mantissa == 0:
        return 0
    if scale >= 0:
        if scale > 19:
            return BEYOND
        ns = mantissa * 10**scale
    elif -scale > len(digits) + 1:
        ns = 0  # below a tenth of a nanosecond
    else:
        unit = 10**-scale
        ns, rest = divmod(mantissa, unit)
        if 2 * rest > unit or (2 * rest == unit and ns % 2 == 1):
            ns += 1
    if ns > INT64_MAX - sign:
        return BEYOND
    return int(-ns if sign else ns)


def micros(ns: np.ndarray, large: bool | None = None) -> list[Any]:
    """Nanoseconds (int64, not negative) as the JSON numbers of their microseconds, exact: floats
    below `LARGE` microseconds (the shortest text of a double there is its three decimals), the
    three-decimal text beyond. `large` chooses the text as `large_micros` of a larger batch did
    (default: of `ns`)."""
    if not (large_micros(ns) if large is None else large):
        floats: list[Any] = (ns / 1000.0).tolist()
        return floats
    whole, part = np.divmod(ns, 1000)
    return [msgspec.Raw(f"{w}.{p:03d}".encode()) for w, p in zip(whole.tolist(), part.tolist())]


_DECIMALS: Final = {
    False: [("%.3f" % (p / 1000))[1:].rstrip("0").ljust(2, "0") for p in range(1000)],
    True: [f".{p:03d}" for p in range(1000)],
}
"""What follows the whole microseconds of a time (by its nanoseconds 0-999) in `micros`'s
text: the shortest (``.5``, ``.0``) for the doubles below `LARGE`, three digits beyond."""


def large_micros(ns: np.ndarray) -> bool:
    """Whether `micros` writes these nanoseconds with three decimals (some reach `LARGE`
    microseconds), not as the shortest text of their doubles."""
    return bool(len(ns)) and int(ns.max()) >= CHROME_EXACT_US * 1000


def micros_text(ns: np.ndarray, large: bool | None = None) -> Any:
    """`micros` as the JSON text of each number (a ``pyarrow`` string array): the same text
    msgspec writes for it, built column-wise (no Python object per value). `large` chooses the
    text as `large_micros` of a larger batch did (default: of `ns`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    large = large_micros(ns) if large is None else large
    whole, part = np.divmod(ns, 1000)
    decimals = pa.array(_DECIMALS[large], pa.string()).take(pa.array(part))
    return pc.binary_join_element_wise(pa.array(whole).cast(pa.string()), decimals, "")


TIME_BASE_STEP: Final = 10**15
"""recfn writes ``baseTimeNanoseconds`` as a multiple of this (about 11.6 days)."""


def time_base(first_ns: int) -> int:
    """The ``baseTimeNanoseconds`` recfn writes for a trace whose first event starts at
    `first_ns`: that time rounded down to a multiple of `TIME_BASE_STEP`. Traces of one job's
    ranks written apart then share it (HTA lines ranks up by ``ts`` alone, as if they had one
    base), and ``ts`` stays far below `LARGE` microseconds, where a double still holds every
    nanosecond (so viewers that read ``ts`` as a double keep them too)."""
    return first_ns - first_ns % TIME_BASE_STEP
