"""A real JupyterLab server and Debian's chromium for the browser tests (and
``benchmarks/bench_widget.py --browser``): start the server on 127.0.0.1 in a folder, open a
notebook in a page, run all its cells, and wait for conditions (never for fixed times).

Nothing here is a test; the fixtures in ``conftest.py`` and the benchmark use it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium")
TOKEN = "recfn-widget-test"
SERVER_START_S = 90
KERNEL_WAIT_MS = 120_000
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def write_notebook(path: Path, cells: Sequence[str]) -> None:
    """A notebook of code cells ``cells``, without outputs."""
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {},
                "source": s,
                "outputs": [],
                "execution_count": None,
            }
            for s in cells
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(notebook))


def jupyter_path() -> str:
    """JUPYTER_PATH naming the data folders (lab extensions, nbconvert templates) of the
    installs the tests use: a venv that sees system packages does not search their prefix."""
    folders = []
    for module in ("jupyterlab_widgets", "anywidget", "jupyterlab", "nbconvert"):
        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None:
            continue
        for parent in Path(spec.origin).resolve().parents:
            share = parent / "share" / "jupyter"
            if share.is_dir() and str(share) not in folders:
                folders.append(str(share))
                break
    return os.pathsep.join([*folders, os.environ.get("JUPYTER_PATH", "")]).strip(os.pathsep)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LabStartError(RuntimeError):
    """The server did not answer within ``SERVER_START_S``; the message holds its log."""


@contextmanager
def lab_server(root: Path) -> Iterator[str]:
    """A JupyterLab server serving ``root`` (its settings, runtime files and log kept there,
    no news, no update checks); yields its base URL and stops it on exit."""
    settings = root / ".settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    port = free_port()
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "JUPYTER_CONFIG_DIR": str(root / ".config"),
        "JUPYTER_PATH": jupyter_path(),
        "JUPYTER_RUNTIME_DIR": str(root / ".runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(root / ".settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(root / ".workspaces"),
        "MPLBACKEND": "Agg",
    }
    log_path = root / "server.log"
    log = log_path.open("w")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--allow-root",  # CI runs as root
            "--expose-app-in-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={TOKEN}",
            f"--ServerApp.root_dir={root}",
            "--LabApp.news_url=",
            "--LabServerApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVER_START_S
    try:
        while True:  # poll the API until the server answers (a condition, not a fixed sleep)
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    raise LabStartError(
                        f"jupyter lab did not start:\n{log_path.read_text()}"
                    ) from None
                time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def launch_chromium(playwright: Any) -> Any:
    """Debian's chromium, headless, through Playwright."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def open_notebook(page: Any, base: str, name: str) -> None:
    """Open notebook ``name`` of the server at ``base`` and wait until its kernel is there."""
    page.goto(f"{base}/lab/tree/{name}?token={TOKEN}", timeout=KERNEL_WAIT_MS)
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
        " && window.jupyterapp.shell.currentWidget.sessionContext"
        " && window.jupyterapp.shell.currentWidget.sessionContext.session"
        " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel",
        timeout=KERNEL_WAIT_MS,
    )


def run_all_cells(page: Any) -> None:
    """Run every cell of the open notebook (returns at once; wait for outputs after)."""
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")


def wait_idle(page: Any, timeout_ms: int = KERNEL_WAIT_MS) -> None:
    """Wait until every code cell of the open notebook has run (its prompt shows a number) and
    the kernel is idle."""
    page.wait_for_function(
        "() => { const nb = window.jupyterapp.shell.currentWidget;"
        " const cells = nb.content.widgets.filter((c) => c.model.type === 'code');"
        " return nb.sessionContext.session.kernel.status === 'idle'"
        " && cells.every((c) => c.model.executionCount !== null"
        " && !c.node.querySelector('.jp-InputPrompt').textContent.includes('*')); }",
        timeout=timeout_ms,
    )
