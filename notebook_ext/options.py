"""Capture options as command-line flags, for ``%%record_function`` and ``recfn run`` alike.

Every flag is generated from ``recfn.capture.options.ProfilerConfig``: ``report_input_shapes`` becomes
``--report-input-shapes`` (plus its declared alias ``--shapes`` and ``--no-report-input-shapes``),
``max_events`` becomes ``--max-events N``, list options take a comma list or repeat. Parsed values
go back through ``ProfilerConfig``, which validates them; its errors are reworded with the flag.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

from recfn.capture.options import (
    KIND_FLAG,
    KIND_FLOAT,
    KIND_INT,
    KIND_LIST,
    OptionSpec,
    ProfilerConfig,
    option_specs,
)
from recfn.errors import OptionError, RecfnValueError

ZERO_ANNOTATION_EXCLUDE = ("__main__::<module>",)
"""The cell's or script's own module body: the outer range already stands for it."""


class _Flag(argparse.Action):
    """A bool option: its spellings set True, ``--no-<name>`` sets False."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: Optional[str] = None,
    ) -> None:
        setattr(namespace, self.dest, not (option_string or "").startswith("--no-"))


def _converter(spec: OptionSpec) -> Callable[[str], Any]:
    """Text to value for one option; a bad text is an argparse error naming the flag."""

    def convert(text: str) -> Any:
        try:
            if spec.kind == KIND_INT:
                return int(text)
            if spec.kind == KIND_FLOAT:
                return float(text)
        except ValueError:
            what = "an integer" if spec.kind == KIND_INT else "a number"
            raise argparse.ArgumentTypeError(f"expects {what}, got {text!r}") from None
        items = text.split(spec.separator) if spec.separator else [text]
        if not all(item.strip() for item in items):
            raise argparse.ArgumentTypeError(f"empty item in {text!r}")
        return [item.strip() for item in items]

    return convert


def flag_name(spec: OptionSpec) -> str:
    """All spellings of an option, as error messages name it: ``--sampling-prob/--sample``."""
    return "/".join(spec.flags)


def negative_flag(spec: OptionSpec) -> str:
    """``--no-trace-calls``: turns a bool option off (front ends may default it on)."""
    return "--no-" + spec.flags[0][2:]


def argument_specs() -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """``(flags, add_argument keywords)`` for every capture option, in declaration order.

    Defaults are None so that only the flags given change the base configuration.
    """
    out: list[tuple[tuple[str, ...], dict[str, Any]]] = []
    for spec in option_specs():
        kwargs: dict[str, Any] = {"dest": spec.name, "default": None, "help": spec.help}
        flags = spec.flags
        if spec.kind == KIND_FLAG:
            flags = (*flags, negative_flag(spec))
            kwargs["action"] = _Flag
        else:
            kwargs["type"] = _converter(spec)
            kwargs["metavar"] = spec.metavar or spec.name.upper()
            if spec.kind == KIND_LIST:
                kwargs["action"] = "append"
                joined = "one per flag" if spec.separator is None else "comma-separated"
                assert spec.separator in (None, ","), "say how items are separated"
                kwargs["help"] = f"{spec.help} ({joined}; repeatable)"
            elif spec.default is not None:
                kwargs["help"] = f"{spec.help} (default {spec.default})"
        out.append((flags, kwargs))
    return out


def add_capture_options(parser: Any) -> None:
    """Add every capture option to an argparse parser or argument group."""
    for flags, kwargs in argument_specs():
        parser.add_argument(*flags, **kwargs)


def config_from_args(
    args: argparse.Namespace | Mapping[str, Any], base: Optional[ProfilerConfig] = None
) -> ProfilerConfig:
    """The ProfilerConfig the parsed flags ask for, on top of ``base`` (default: defaults).

    OptionError (a usage mistake) when ProfilerConfig refuses a value, naming the flag.
    """
    values = vars(args) if isinstance(args, argparse.Namespace) else dict(args)
    given: dict[str, Any] = {}
    for spec in option_specs():
        value = values.get(spec.name)
        if value is None:
            continue
        if spec.kind == KIND_LIST:
            value = tuple(item for chunk in value for item in chunk)
        given[spec.name] = value
    try:
        return ProfilerConfig.from_options(given, base=base)
    except (ValueError, TypeError) as exc:
        message = str(exc)
        for spec in option_specs():
            message = message.replace(f"ProfilerConfig.{spec.name}", flag_name(spec))
        raise OptionError(message) from None


def zero_annotation_base(
    args: argparse.Namespace | Mapping[str, Any],
) -> Optional[ProfilerConfig]:
    """The base configuration of the magic and ``recfn run``: the calls of user code and the
    library calls it makes, at any depth (``trace_user_code``), so plain code without ranges of
    its own still shows where its time goes, down to the user function a library calls back.

    None (the library's defaults) when the flags decide about tracing: ``--trace-calls`` (then
    every call, as ``recfn.profile(trace_calls=True)``), ``--no-trace-calls``, or
    ``--record-scopes`` without ``function``.
    """
    values = vars(args) if isinstance(args, argparse.Namespace) else dict(args)
    if values.get("trace_calls") is not None:
        return None
    scopes = [item.lower() for chunk in values.get("record_scopes") or () for item in chunk]
    if scopes and "function" not in scopes:
        return None
    return ProfilerConfig(
        trace_calls=True,
        trace_user_code=True,
        trace_exclude=ZERO_ANNOTATION_EXCLUDE,
    )


def front_end_config(args: argparse.Namespace) -> ProfilerConfig:
    """The configuration the magic's or ``recfn run``'s flags ask for, over
    ``zero_annotation_base`` (``--trace-exclude`` patterns add to its exclusion)."""
    base = zero_annotation_base(args)
    config = config_from_args(args, base=base)
    if base is not None and config.trace_exclude != base.trace_exclude:
        patterns = (*ZERO_ANNOTATION_EXCLUDE, *(config.trace_exclude or ()))
        config = ProfilerConfig.from_options({"trace_exclude": patterns}, base=config)
    return config


def follows_user_code(config: Mapping[str, Any]) -> bool:
    """Whether a stored configuration (``Trace.config``) traced the calls of user code and its
    library entry points (the front ends' default, perhaps widened or narrowed by flags)."""
    return config.get("trace_calls") is True and config.get("trace_user_code") is True


def is_zero_annotation(config: Mapping[str, Any]) -> bool:
    """Whether a stored configuration (``Trace.config``) traced calls by the front ends' default."""
    return (
        follows_user_code(config)
        and config.get("trace_max_depth") is None
        and not config.get("trace_include")
        and list(config.get("trace_exclude") or ()) == list(ZERO_ANNOTATION_EXCLUDE)
    )


def config_flags(config: Mapping[str, Any], skip: Sequence[str] = ()) -> list[str]:
    """The flags that reproduce a stored configuration (``Trace.config()``), defaults left out,
    each in its shortest spelling: ``["--shapes", "--max-events 1000"]``."""
    out: list[str] = []
    for spec in option_specs():
        if spec.name in skip or spec.name not in config:
            continue
        value = config[spec.name]
        if value == spec.default or value is None:
            continue
        flag = min(spec.flags, key=len)
        if spec.kind == KIND_FLAG:
            out.append(flag if value else negative_flag(spec))
        elif spec.kind == KIND_LIST:
            items = [str(item) for item in value]
            if spec.separator:
                out.append(f"{flag} {spec.separator.join(items)}")
            else:
                out.extend(f"{flag} {item}" for item in items)
        else:
            out.append(f"{flag} {value}")
    return out


def split_options(
    parser: argparse.ArgumentParser, tokens: Sequence[str], *, interleaved: bool = False
) -> tuple[list[str], list[str], int]:
    """Split ``tokens`` into the parser's options (with their values) and the rest.

    The rest starts at the first token that is not an option (a statement, a script); with
    ``interleaved`` the parser's options are still taken from after it (except ``-h``, which
    then belongs to the script). ``--`` ends the options. Returns ``(options, rest, start)``
    where ``start`` is the index in ``tokens`` where the rest begins. ValueError names an
    unknown option before the rest, or an option missing its value.
    """
    own: list[str] = []
    rest: list[str] = []
    start = len(tokens)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "--":
            start = min(start, i + 1)
            rest.extend(tokens[i + 1 :])
            break
        arity = _arity(parser, token) if interleaved or not rest else None
        if rest and token in ("-h", "--help"):
            arity = None
        if arity is None:
            if not rest and token.startswith("-") and token != "-":
                raise RecfnValueError(f"unknown option {token!r}")
            start = min(start, i)
            rest.append(token)
            if not interleaved:
                rest.extend(tokens[i + 1 :])
                break
        else:
            if i + arity >= len(tokens):
                raise RecfnValueError(f"option {token} needs a value")
            own.extend(tokens[i : i + arity + 1])
            i += arity
        i += 1
    return own, rest, start


def _arity(parser: argparse.ArgumentParser, token: str) -> Optional[int]:
    """How many following tokens an option of ``parser`` takes (None: not one of its options)."""
    name, has_value = token.split("=", 1)[0], "=" in token
    action = parser._option_string_actions.get(name)
    if action is None:
        return None
    return 0 if has_value or action.nargs == 0 else 1
