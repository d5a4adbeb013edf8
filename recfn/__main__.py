"""``python -m recfn ...``: the ``recfn`` command line (notebook_ext.cli)."""

from recfn.notebook_ext.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
