"""Types of recfn.native._cchrome, the Chrome trace reader's native decoder and the writer's
complete events (``recfn/native/_cchrome.c``)."""

from typing import Any

def decode(
    text: bytes, max_depth: int, sequence_default: int, fwd_default: int, /
) -> dict[str, Any] | None: ...
def encode_complete(*columns: Any) -> bytes:
    """The complete ("X") events of recfn.formats.chrome._writer.complete_events, comma
    separated (see the C source for its 22 arguments)."""
