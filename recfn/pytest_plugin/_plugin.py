"""The plugin proper, registered by ``recfn.pytest_plugin.pytest_configure`` when asked.

Each process that runs tests (the only one, or each pytest-xdist worker) profiles its whole
session into the run's dataset (``recfn.profile(output=...)``: one ``process=<pid>`` folder per
worker) and wraps every test function's call in a range named by the test's node id. The
controller (or the only process) picks the run's folder, hands it to the workers, and at the
end compares the run with the baseline: the table goes to the terminal summary, and
``--recfn-fail-on`` turns significant regressions into a failed session.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Generator
from typing import Any, Optional

import pytest

import recfn

WORKER_KEY = "recfn_run"
"""``workerinput`` key: the run folder the controller picked, for pytest-xdist workers."""


class RecfnPlugin:
    """One session's recording and comparison."""

    NAME = "recfn-session"

    def __init__(self, config: pytest.Config) -> None:
        from recfn.analysis.runsets import parse_percent
        from recfn.errors import RecfnValueError

        self.config = config
        option = config.option
        self.repeat = int(option.recfn_repeat or 1)
        if self.repeat < 1:
            raise pytest.UsageError(f"--recfn-repeat must be >= 1, got {self.repeat}")
        try:
            self.threshold = (
                None
                if option.recfn_fail_on is None
                else parse_percent(option.recfn_fail_on, "--recfn-fail-on")
            )
            self.floor = parse_percent(option.recfn_min_share, "--recfn-min-share")
        except RecfnValueError as exc:
            raise pytest.UsageError(str(exc)) from None
        if self.threshold is not None and not option.recfn_baseline:
            raise pytest.UsageError("--recfn-fail-on needs --recfn-baseline DIR")
        self.baseline: Optional[str] = option.recfn_baseline
        self.patterns: list[str] = list(option.recfn_trace_calls or [])
        self.profile: Any = None
        self.comparison: Any = None
        self.failed: list[str] = []
        self.problem: Optional[str] = None
        self.scratch: Optional[str] = None
        workerinput = getattr(config, "workerinput", None)
        if workerinput is not None:  # an xdist worker: the controller picked the folder
            self.run_folder: str = workerinput[WORKER_KEY]
        elif option.recfn_output:
            from recfn.analysis.runsets import next_run_folders

            os.makedirs(option.recfn_output, exist_ok=True)
            self.run_folder = next_run_folders(option.recfn_output, 1)[0]
        else:  # only a baseline: this session's run is compared, then dropped
            self.scratch = tempfile.mkdtemp(prefix="recfn-pytest-")
            self.run_folder = os.path.join(self.scratch, "run-0001")
        self.is_worker = workerinput is not None

    # -- pytest-xdist --------------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKER_KEY] = self.run_folder

    def _controls_workers(self) -> bool:
        return self.config.pluginmanager.getplugin("dsession") is not None

    # -- recording -------------------------------------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self._controls_workers():
            return  # the workers run the tests and record them
        options: dict[str, Any] = {}
        if self.patterns:
            options.update(trace_calls=True, trace_include=self.patterns)
        os.makedirs(self.run_folder, exist_ok=True)
        self.profile = recfn.profile(output=self.run_folder + os.sep, **options)
        self.profile.start()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        if self.profile is None:
            return (yield)
        name = item.nodeid
        for _ in range(self.repeat - 1):
            with recfn.record_function(name):
                item.runtest()
        with recfn.record_function(name):
            return (yield)

    # -- the end -----------------------------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.profile is not None:
            self.profile.stop()
            self.profile = None
        if self.is_worker or self.baseline is None:
            return
        from recfn.analysis.runsets import read_runs
        from recfn.errors import RecfnError, RunSetError

        mine = os.path.abspath(self.run_folder)
        try:
            baseline = [  # this session's run may lie in the baseline's folder: not its own baseline
                run
                for run in read_runs(self.baseline, "baseline")
                if not any(os.path.abspath(name).startswith(mine + os.sep) for name in run.files)
            ]
            if not baseline:
                raise RunSetError(f"baseline: no runs in {self.baseline!r} but this session's")
            self.comparison = recfn.compare(
                baseline, self.run_folder, labels=(self.baseline, "this session")
            )
        except RecfnError as exc:
            self.problem = f"recfn: no comparison: {exc}"
            return
        if self.threshold is None:
            return
        found = self.comparison.regressions(self.threshold, self.floor)
        found = found[found.index.get_level_values(0) != "(common shift)"]
        self.failed = [
            f"{key} {row['change']:+.1%} [{row['change_low']:+.1%}, {row['change_high']:+.1%}]"
            for key, row in found.iterrows()
        ]
        if self.failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker:
            return
        write = terminalreporter.write_line
        terminalreporter.section("recfn")
        if self.scratch is None:
            write(f"recfn: this session's run: {self.run_folder}")
        if self.problem is not None:
            write(self.problem, red=True)
        if self.comparison is not None:
            for line in self.comparison.to_text(top=40).splitlines():
                write(line)
        if self.failed:
            write(
                f"recfn: {len(self.failed)} got slower by more than {self.threshold:.1%}: "
                + "; ".join(self.failed),
                red=True,
                bold=True,
            )
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
