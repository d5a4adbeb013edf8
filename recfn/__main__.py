"""``python -m recfn ...``: the ``recfn`` command line (``recfn.cli``)."""

from recfn.cli import console

if __name__ == "__main__":
    console()
