"""Types of recfn.native._cchrome, the Chrome trace reader's native decoder (``recfn/native/_cchrome.c``)."""

from typing import Any

def decode(
    text: bytes, max_depth: int, sequence_default: int, fwd_default: int, /
) -> dict[str, Any] | None: ...
