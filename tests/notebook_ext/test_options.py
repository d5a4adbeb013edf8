"""One source of capture options: every ProfilerConfig field is reachable, with the same
spelling, from ``recfn.profile()``, ``%%record_function`` and ``recfn run``, and each flag lands
in the recorded configuration (the trace metadata ``recfn.config``)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from IPython.core.error import UsageError

import recfn
from recfn.capture.options import ProfilerConfig
from recfn.cli import build_parser, main, subcommand_parser
from recfn.notebook_ext.magics import RecordFunctionMagics
from recfn.notebook_ext.options import config_flags, config_from_args, follows_user_code
from recfn.notebook_ext.sessions import current_session

ZERO_ANNOTATION = ProfilerConfig(
    trace_calls=True, trace_user_code=True, trace_exclude=("__main__::<module>",)
)
FIELDS = [field.name for field in dataclasses.fields(ProfilerConfig)]
# The short spellings decided for the front ends; every option also has --its-name.
ALIASES = {
    "report_input_shapes": "--shapes",
    "profile_memory": "--memory",
    "with_stack": "--stack",
    "with_flops": "--flops",
    "sampling_prob": "--sample",
}
# Options that only make sense with another one.
NEEDS = {"trace_c_calls": {"trace_calls": True}, "trace_user_code": {"trace_calls": True}}
ITEMS = ["function", "user_scope"]  # valid as scope names and as fnmatch patterns alike


def example(name: str) -> tuple[Any, list[str]]:
    """A value that is not the default for option ``name``, and the flags that ask for it."""
    default = getattr(ProfilerConfig(), name)
    flag = "--" + name.replace("_", "-")
    if isinstance(default, bool):
        return True, [flag]
    if isinstance(default, float):
        return 0.5, [flag, "0.5"]
    if isinstance(default, int) or name in ("trace_max_depth", "flight_recorder"):
        return 1234, [flag, "1234"]
    if name == "record_scopes":  # a comma list
        return ITEMS, [flag, ",".join(ITEMS)]
    return ITEMS, [arg for item in ITEMS for arg in (flag, item)]  # a repeatable flag


def flags_for(name: str) -> tuple[Any, list[str]]:
    value, flags = example(name)
    for other, other_value in NEEDS.get(name, {}).items():
        assert other_value is True
        flags = ["--" + other.replace("_", "-"), *flags]
    return value, flags


def magic_parser() -> Any:
    return RecordFunctionMagics.record_function.parser


def run_parser() -> Any:
    return subcommand_parser(build_parser(), "run")


def spellings(parser: Any, dest: str) -> set[str]:
    return {s for a in parser._actions if a.dest == dest for s in a.option_strings}


def test_profile_takes_exactly_the_config_fields_keyword_only():
    params = inspect.signature(recfn.profile).parameters
    assert list(params) == ["config", *FIELDS]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    defaults = ProfilerConfig()
    assert all(params[name].default == getattr(defaults, name) for name in FIELDS)
    assert all(name in (recfn.profile.__doc__ or "") for name in FIELDS)
    with pytest.raises(TypeError):
        recfn.profile(True)  # type: ignore[misc]


def test_unknown_option_names_the_valid_ones():
    with pytest.raises(TypeError, match=r"unknown profiler option 'shapes'.*report_input_shapes"):
        recfn.profile(shapes=True)
    with pytest.raises(TypeError, match="trace_max_depth"):
        recfn.RecordProfile("t.parquet", bogus=1)


def test_options_beside_a_config_override_it():
    base = ProfilerConfig(report_input_shapes=True, max_events=100)
    prof = recfn.profile(config=base, max_events=50)
    assert prof.config == dataclasses.replace(base, max_events=50)
    assert recfn.profile(config=base).config is base


@pytest.mark.parametrize("name", FIELDS)
def test_magic_and_cli_spell_each_option_alike(name: str):
    expected = {"--" + name.replace("_", "-")} | ({ALIASES[name]} if name in ALIASES else set())
    magic, cli = spellings(magic_parser(), name), spellings(run_parser(), name)
    assert magic == cli
    assert expected <= magic
    assert magic - expected <= {"--no-" + name.replace("_", "-")}


def config_in(path: Path) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(pq.read_schema(path).metadata[b"recfn.config"])
    return config


def _cuda_device() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


NEEDS_HARDWARE = {"cuda": (_cuda_device, "cuda=True needs torch and a CUDA device")}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            name,
            marks=pytest.mark.skipif(
                name in NEEDS_HARDWARE and not NEEDS_HARDWARE[name][0](),
                reason=NEEDS_HARDWARE.get(name, (None, ""))[1],
            ),
        )
        for name in FIELDS
    ],
)
def test_each_option_reaches_the_recorded_config_from_all_three(
    name: str, shell: Any, tmp_path: Path
):
    value, flags = flags_for(name)
    assert value != getattr(ProfilerConfig(), name)
    extra = NEEDS.get(name, {})

    with recfn.profile(**{name: value}, **extra) as prof:
        pass
    from_profile = json.loads(prof.table.schema.metadata[b"recfn.config"])

    run = shell.run(f"%%record_function --quiet {' '.join(flags)}\nx = 1")
    assert run.error is None
    trace = current_session().last
    from_magic = trace.config

    script = tmp_path / "job.py"
    script.write_text("x = 1\n")
    out = tmp_path / "t.parquet"
    assert main(["run", "-q", *flags, str(script), "-o", str(out)]) == 0
    from_cli = config_in(out)

    # The front ends follow user code unless a flag decides about tracing.
    front_end = ProfilerConfig() if "trace_calls" in (name, *extra) else ZERO_ANNOTATION
    for config, base in (
        (from_profile, ProfilerConfig()),
        (from_magic, front_end),
        (from_cli, front_end),
    ):
        added = list(base.trace_exclude or ()) if name == "trace_exclude" else []
        assert config[name] == added + value if added else config[name] == value, config
        assert {k: v for k, v in config.items() if k != name and k not in extra} == {
            k: v
            for k, v in json.loads(json.dumps(base.to_dict())).items()
            if k != name and k not in extra
        }
    if name == "sampling_prob":
        assert "ranges sampled at 50%" in trace.header()
    elif follows_user_code(from_magic):  # the default in words, then what differs from it
        assert "your code's calls and the library calls it makes" in trace.header()
        own = [p for p in from_magic["trace_exclude"] or () if p != "__main__::<module>"]
        shown = config_flags(
            {**from_magic, "trace_exclude": own or None}, skip=("trace_calls", "trace_user_code")
        )
        assert all(flag in trace.header() for flag in shown)
        assert "__main__::<module>" not in trace.header()
    else:
        assert all(flag in trace.header() for flag in config_flags(from_magic))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-events", "lots"], "--max-events: expects an integer, got 'lots'"),
        (["--max-events", "0"], "--max-events must be positive"),
        (["--sample", "x"], "expects a number"),
        (["--record-scopes", "function,,user_scope"], "empty item"),
        (["--record-scopes", "nope"], "--record-scopes: unknown RecordScope name 'nope'"),
        (["--no-trace-calls", "--trace-c-calls"], "--trace-c-calls needs trace_calls"),
        (["--trace-max-depth", "-2"], "at least 1"),
    ],
)
def test_bad_values_are_one_line_usage_errors(
    flags: list[str], message: str, shell: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    run = shell.run(f"%%record_function {' '.join(flags)}\nran = True")
    assert isinstance(run.error, UsageError) and message in str(run.error)
    assert "ran" not in shell.ns

    script = tmp_path / "job.py"
    script.write_text("raise SystemExit('the script must not run')\n")
    capsys.readouterr()
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        code = main(["run", *flags, str(script)])
    finally:
        os.chdir(old)
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("recfn: error: run: ") and message in err
    assert "Traceback" not in err


def test_flags_turn_options_off_over_a_base_config():
    args = magic_parser().parse_args(["--no-report-input-shapes", "--trace-calls"])
    base = ProfilerConfig(report_input_shapes=True)
    config = config_from_args(args, base=base)
    assert config == ProfilerConfig(report_input_shapes=False, trace_calls=True)
    assert config_flags(config.to_dict()) == ["--trace-calls"]
    assert config_flags(base.to_dict()) == ["--shapes"]
    assert config_flags(ProfilerConfig(report_input_shapes=False).to_dict()) == []
