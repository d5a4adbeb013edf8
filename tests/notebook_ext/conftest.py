"""Fixtures for the notebook extension: a real InteractiveShell with the extension loaded, and a
helper that runs a cell and returns what it displayed (``checkout_env`` is the root conftest's)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("IPython")

from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from recfn.notebook_ext.sessions import current_session


@dataclasses.dataclass
class CellRun:
    """What one cell did: its ExecutionResult, printed text and display outputs (mime bundles)."""

    result: Any
    stdout: str
    stderr: str
    outputs: list[dict[str, Any]]

    @property
    def error(self) -> Any:
        return self.result.error_in_exec or self.result.error_before_exec

    def mime(self, kind: str) -> list[Any]:
        return [data[kind] for data in self.outputs if kind in data]


class Shell:
    def __init__(self, ip: InteractiveShell) -> None:
        self.ip = ip

    def run(self, source: str) -> CellRun:
        with capture_output() as captured:
            result = self.ip.run_cell(source, store_history=True)
        return CellRun(result, captured.stdout, captured.stderr, [o.data for o in captured.outputs])

    @property
    def ns(self) -> dict[str, Any]:
        return self.ip.user_ns


@pytest.fixture(scope="session")
def _interactive_shell() -> InteractiveShell:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "recfn")
    return ip


@pytest.fixture
def shell(_interactive_shell: InteractiveShell) -> Iterator[Shell]:
    current_session().reset()
    yield Shell(_interactive_shell)
    current_session().reset()
