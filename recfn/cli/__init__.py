"""The ``recfn`` command line (also ``python -m recfn``).

    recfn run script.py [args...] [-o trace.parquet] [--timeline out.png] [capture options]
    recfn summary TRACE          recfn timeline TRACE -o out.png
    recfn convert IN -o OUT      recfn diff BASELINE CURRENT
    recfn demo                   recfn codegen ...

The capture options (``--shapes``, ``--trace-calls``, ``--max-events N``, ...) are generated from
``recfn.ProfilerConfig`` (notebook_ext/options.py), as for ``%%record_function``. ``-o/--output``
names a file to write, or a folder (ending in ``/`` or existing) for a streamed dataset. With
``--flight-recorder N`` only the last N events are kept, and written to ``-o`` at the end, or when
the script raises (to ``recfn-flight-<pid>.parquet`` without ``-o``) or gets SIGUSR1.

User mistakes (missing files, files that are not traces, bad options) end with one line on
stderr, ``recfn: error: <file>: <what is wrong>``, and a non-zero exit, never a traceback. Any
other exception also ends with one line (``RECFN_DEBUG=1`` adds its traceback). Exit codes:
0 success, 1 failure or bad input, 2 bad usage; ``run`` exits with the script's own code (130
when interrupted), and shows the script's own exceptions as Python would.
"""

from __future__ import annotations

from recfn.cli._common import subcommand_parser
from recfn.cli._main import build_parser, console, main

__all__ = ["build_parser", "console", "main", "subcommand_parser"]
