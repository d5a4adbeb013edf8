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
import tempfile
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
    no news, no update checks, notebooks not windowed); yields its base URL and stops it on
    exit."""
    settings = root / ".settings" / "@jupyterlab"
    (settings / "apputils-extension").mkdir(parents=True, exist_ok=True)
    (settings / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false"}'
    )
    # Every cell in the page (no windowing): a test finds a cell's outputs wherever it scrolled.
    (settings / "notebook-extension").mkdir(parents=True, exist_ok=True)
    (settings / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
        '{"windowingMode": "none"}'
    )
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
    """Open notebook ``name`` of the server at ``base``, alone in a fresh workspace, and wait
    until its kernel is connected and idle (cells run before that may be dropped)."""
    # A workspace of its own, reset: no tab of another page's notebook is restored beside it.
    workspace = "".join(ch if ch.isalnum() else "-" for ch in Path(name).stem)
    page.goto(
        f"{base}/lab/workspaces/{workspace}/tree/{name}?reset&token={TOKEN}",
        timeout=KERNEL_WAIT_MS,
    )
    page.wait_for_function(
        "() => { const nb = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
        " const kernel = nb && nb.sessionContext && nb.sessionContext.session"
        " && nb.sessionContext.session.kernel;"
        " return Boolean(kernel) && nb.sessionContext.isReady"
        " && kernel.connectionStatus === 'connected' && kernel.status === 'idle'; }",
        timeout=KERNEL_WAIT_MS,
    )


def run_all_cells(page: Any) -> None:
    """Run every cell of the open notebook: its panel made the current one, then JupyterLab's
    "run all" command, again until the first cell has started (a command that found no
    current notebook does nothing). Returns once it has; wait for the outputs after."""
    started = (
        "() => { const c = window.jupyterapp.shell.currentWidget.content.widgets"
        ".find((w) => w.model.type === 'code');"
        " return !c || c.model.executionCount !== null"
        " || c.node.querySelector('.jp-InputPrompt').textContent.includes('*'); }"
    )
    for _ in range(5):
        page.evaluate(
            "async () => { const app = window.jupyterapp; const nb = app.shell.currentWidget;"
            " app.shell.activateById(nb.id); await nb.sessionContext.ready;"
            " await app.commands.execute('notebook:run-all-cells'); }"
        )
        try:
            page.wait_for_function(started, timeout=10_000)
            return
        except Exception:
            continue
    page.wait_for_function(started, timeout=10_000)


def wait_idle(page: Any, timeout_ms: int = KERNEL_WAIT_MS) -> None:
    """Wait until every code cell of the open notebook has run (its prompt shows a number) and
    the kernel is idle; on a timeout, say where each cell stands."""
    try:
        page.wait_for_function(
            "() => { const nb = window.jupyterapp.shell.currentWidget;"
            " const cells = nb.content.widgets.filter((c) => c.model.type === 'code');"
            " return nb.sessionContext.session.kernel.status === 'idle'"
            " && cells.every((c) => c.model.executionCount !== null"
            " && !c.node.querySelector('.jp-InputPrompt').textContent.includes('*')); }",
            timeout=timeout_ms,
        )
    except Exception as exc:
        page.screenshot(path=str(Path(tempfile.gettempdir()) / "recfn-wait-idle.png"))
        state = page.evaluate(
            "() => { const nb = window.jupyterapp.shell.currentWidget;"
            " return {kernel: nb.sessionContext.session.kernel.status,"
            " cells: nb.content.widgets.map((c) => [c.model.type, c.model.executionCount,"
            " (c.node.querySelector('.jp-InputPrompt') || {}).textContent])}; }"
        )
        raise TimeoutError(f"the notebook did not finish running: {state}") from exc
