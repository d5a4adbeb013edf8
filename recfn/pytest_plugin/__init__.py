"""recfn's pytest plugin (the ``pytest11`` entry point ``recfn``): off unless asked.

    pytest --recfn runs/                  # every test a range named by its node id, a run per session
    pytest --recfn-baseline runs-main/ --recfn-fail-on 10% --recfn-repeat 5

Without a ``--recfn*`` option this module only adds the options: no hook runs per test and
nothing else of recfn is imported (the plugin itself is ``_plugin``, registered by
`pytest_configure` when asked). docs/compare.md explains the comparison.
"""

from __future__ import annotations

from typing import Any

OPTIONS = ("recfn_output", "recfn_baseline")
"""Either turns the plugin on."""


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("recfn", "recfn: time every test as a range; compare with a baseline")
    group.addoption(
        "--recfn",
        dest="recfn_output",
        metavar="DIR",
        help="record every test as a range named by its node id (and the ranges inside it) "
        "into the run set DIR: this session writes DIR/run-<k>/, a dataset with one folder per "
        "worker process (pytest-xdist)",
    )
    group.addoption(
        "--recfn-baseline",
        metavar="DIR",
        help="at the end, compare this session with the run set DIR (recorded with --recfn) "
        "and print the table in the terminal summary",
    )
    group.addoption(
        "--recfn-fail-on",
        metavar="PCT",
        help="with --recfn-baseline: fail the session when a test or range got significantly "
        "slower by more than PCT (10%% or 0.1)",
    )
    group.addoption(
        "--recfn-min-share",
        metavar="PCT",
        default="0%",
        help="--recfn-fail-on looks only at ranges with at least this share of the session's "
        "time (default 0%%: every test)",
    )
    group.addoption(
        "--recfn-repeat",
        type=int,
        metavar="N",
        default=1,
        help="run each test function N times (fixtures set up once), each call a range: the "
        "samples the comparison needs (default 1)",
    )
    group.addoption(
        "--recfn-trace-calls",
        metavar="PATTERN",
        action="append",
        help="also record the Python calls matching PATTERN (fnmatch on the module or "
        "module.qualname, e.g. 'mypkg.*'; repeatable) inside each test",
    )


def pytest_configure(config: Any) -> None:
    option = config.option
    if not any(getattr(option, name, None) for name in OPTIONS):
        for name, flag in (
            ("recfn_fail_on", "--recfn-fail-on"),
            ("recfn_trace_calls", "--recfn-trace-calls"),
        ):
            if getattr(option, name, None):
                import pytest

                raise pytest.UsageError(f"{flag} needs --recfn DIR or --recfn-baseline DIR")
        return
    from recfn.pytest_plugin._plugin import RecfnPlugin

    config.pluginmanager.register(RecfnPlugin(config), RecfnPlugin.NAME)
