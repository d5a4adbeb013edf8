"""Loading the extension imports what the first capture's display needs, so that the first
cell a user profiles waits no longer than later ones (``FIRST_CELL_MODULES``)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import json, sys
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "recfn")
    shell.run_cell("def work():\\n    return sorted(range(1000))")
    before = set(sys.modules)
    with capture_output():
        result = shell.run_cell("%%record_function first\\nwork()\\nwork()")
    assert result.error_in_exec is None, result.error_in_exec
    print(json.dumps(sorted(set(sys.modules) - before)))
    print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] == "matplotlib")))
    """
)
WATCHED = ("recfn", "pyarrow", "PIL", "matplotlib", "msgspec", "isal")


def test_the_first_cell_imports_nothing_the_extension_could_have() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    imported = json.loads(done.stdout.strip().splitlines()[-2])
    assert [name for name in imported if name.split(".")[0] in WATCHED] == []


def test_the_extension_and_its_display_load_no_matplotlib() -> None:
    """The picture is drawn with numpy and Pillow, its colours and ticks matplotlib's as
    constants and a port (`plots.colors`, `plots.ticks`): loading matplotlib took about a
    quarter of a second of ``%load_ext recfn``, which a user waits for once per kernel."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_a_module_that_cannot_load_early_does_not_stop_the_extension(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import recfn.notebook_ext as extension

    monkeypatch.setattr(
        extension, "FIRST_CELL_MODULES", ("recfn_no_such_module", *extension.FIRST_CELL_MODULES)
    )
    registered = []
    monkeypatch.setattr("recfn.notebook_ext.magics.register", registered.append)
    shell = object()
    extension.load_ipython_extension(shell)
    assert registered == [shell]
