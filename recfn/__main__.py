"""``python -m recfn ...``: the ``recfn`` command line (notebook_ext.cli)."""

from recfn.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
