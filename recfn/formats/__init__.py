"""Reading and writing traces: the event table's schema (``schema``, the one owner of columns,
types and metadata keys), ``recfn.Trace`` (``trace``), format detection and Parquet (``io``),
datasets of many processes (``dataset``) and the clock offsets applied when they are loaded
(``clocks``), Chrome/Perfetto JSON (``chrome``), atomic writes (``files``), and the helpers the
analysis layer shares (``columns``, ``nesting``, ``progress``).

This ``__init__`` imports nothing: ``import recfn`` reaches ``formats.hooks`` without loading
pyarrow or pandas, which the other modules import at their top.
"""
