"""Capture options: ``ProfilerConfig`` declares each one once — name, type, default, help, flags.

``recfn.profile(**options)``, the ``%%record_function`` flags and the ``recfn run`` flags are all
generated from these fields (see ``option_specs()``), so a new option is one field here plus the
code that acts on it. Validation lives here too and names the option that was wrong.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Final, Optional

from recfn.capture._tracer import check_options as check_trace_options
from recfn.engine.scope import RecordScope, as_scope
from recfn.errors import RecfnTypeError, RecfnValueError

DEFAULT_MAX_EVENTS: Final = 5_000_000  # 40 bytes a range: about 200 MB at most

# What a command line makes of a field, from its annotation (Optional[...] stripped).
KIND_FLAG: Final = "flag"  # bool: --name / --no-name
KIND_INT: Final = "int"
KIND_FLOAT: Final = "float"
KIND_LIST: Final = "list"  # tuple[...]: items joined by `separator`, or the flag repeated


def _option(
    default: Any,
    help: str,
    *aliases: str,
    metavar: Optional[str] = None,
    separator: Optional[str] = None,
) -> Any:
    """A ProfilerConfig field with what front ends need to offer it as a flag."""
    return dataclasses.field(
        default=default,
        metadata={"help": help, "aliases": aliases, "metavar": metavar, "separator": separator},
    )


@dataclasses.dataclass(frozen=True)
class ProfilerConfig:
    """What a profile records: every capture option, validated (ValueError/TypeError name it)."""

    report_input_shapes: bool = _option(False, "record input shapes and dtypes", "--shapes")
    profile_memory: bool = _option(False, "record memory events (tracemalloc)", "--memory")
    with_stack: bool = _option(False, "record the Python stack of each range", "--stack")
    with_flops: bool = _option(
        False, "count FLOPs of ranges with a formula (matmul, conv, ...)", "--flops"
    )
    max_events: int = _option(
        DEFAULT_MAX_EVENTS,
        "keep at most this many events; the rest are only counted (dropped)",
        metavar="N",
    )
    flush_interval: float = _option(
        10.0,
        "with output= a dataset folder: write the recorded events at least every S seconds, "
        "so a process killed without warning loses at most the last S seconds",
        metavar="S",
    )
    flight_recorder: Optional[int] = _option(
        None,
        "flight recorder: keep only the last N events (and the ranges still open) and write "
        "them when an exception escapes, on SIGUSR1 or on demand (profile.dump())",
        metavar="N",
    )
    record_scopes: Optional[tuple[RecordScope, ...]] = _option(
        None,
        "record only ranges of these RecordScopes, by name (function, user_scope, ...); "
        "default: all",
        metavar="SCOPES",
        separator=",",
    )
    sampling_prob: float = _option(
        1.0,
        "the probability of recording each range (marks and memory events are always kept)",
        "--sample",
        metavar="P",
    )
    trace_calls: bool = _option(
        False, "a FUNCTION-scope range per Python call of the profiled threads (not sampled)"
    )
    trace_c_calls: bool = _option(False, "with trace_calls: C function calls too")
    trace_user_code: bool = _option(
        False,
        "with trace_calls: record the calls of user code (not the standard library, installed "
        "packages or recfn) and the library calls it makes, at any depth; the library's own "
        "calls below those are counted (hidden_calls), not recorded",
    )
    trace_include: Optional[tuple[str, ...]] = _option(
        None,
        "with trace_calls: trace only calls matching one of these fnmatch patterns (matched "
        "against the module or a package holding it, module.qualname and the recorded "
        "module::qualname); with trace_user_code: record the code they match as user code",
        metavar="PAT",
    )
    trace_exclude: Optional[tuple[str, ...]] = _option(
        None, "with trace_calls: skip calls matching one of these patterns", metavar="PAT"
    )
    trace_max_depth: Optional[int] = _option(
        None, "with trace_calls: trace calls nested at most this deep", metavar="N"
    )
    nvtx: bool = _option(
        False,
        "also forward every range and mark to NVTX, so Nsight Systems shows them (needs the "
        "nvtx package: pip install 'recfn[gpu]')",
    )
    cuda: bool = _option(
        False,
        "GPU time per range from CUDA events on the current stream (needs torch with a CUDA "
        "device)",
    )

    def __post_init__(self) -> None:
        for spec in option_specs():
            _check_type(spec, getattr(self, spec.name))
        if self.max_events <= 0:
            raise RecfnValueError(
                f"ProfilerConfig.max_events must be positive, got {self.max_events}"
            )
        if not 0.0 < self.flush_interval < float("inf"):
            raise RecfnValueError(
                "ProfilerConfig.flush_interval must be a positive number of seconds, got "
                f"{self.flush_interval}"
            )
        if self.flight_recorder is not None and self.flight_recorder <= 0:
            raise RecfnValueError(
                f"ProfilerConfig.flight_recorder must be positive, got {self.flight_recorder}"
            )
        if not 0.0 <= self.sampling_prob <= 1.0:
            raise RecfnValueError(
                f"ProfilerConfig.sampling_prob must be in [0, 1], got {self.sampling_prob}"
            )
        if self.record_scopes is not None:
            if isinstance(self.record_scopes, (str, int)) or not isinstance(
                self.record_scopes, Iterable
            ):
                raise RecfnTypeError(
                    "ProfilerConfig.record_scopes must be a collection of RecordScope, got "
                    f"{self.record_scopes!r}"
                )
            try:
                scopes = tuple(as_scope(s) for s in self.record_scopes)
            except ValueError as exc:
                raise RecfnValueError(f"ProfilerConfig.record_scopes: {exc}") from None
            if not scopes:
                raise RecfnValueError(
                    "ProfilerConfig.record_scopes is empty: nothing would be recorded"
                )
            object.__setattr__(self, "record_scopes", scopes)
        include, exclude = check_trace_options(
            self.trace_calls,
            self.trace_c_calls,
            self.trace_include,
            self.trace_exclude,
            self.trace_max_depth,
            self.record_scopes,
            self.trace_user_code,
        )
        object.__setattr__(self, "trace_include", include)
        object.__setattr__(self, "trace_exclude", exclude)

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], base: Optional[ProfilerConfig] = None
    ) -> ProfilerConfig:
        """``base`` (default: all defaults) with ``options`` changed; TypeError for unknown names."""
        names = option_names()
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise RecfnTypeError(
                f"unknown profiler option{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(map(repr, unknown))}; valid options: {', '.join(names)}"
            )
        if base is None:
            return cls(**options)
        return dataclasses.replace(base, **options)

    def to_dict(self) -> dict[str, Any]:
        """Plain values (scopes by label), as stored in the trace metadata ``recfn.config``."""
        out = dataclasses.asdict(self)
        if self.record_scopes is not None:
            out["record_scopes"] = [s.label for s in self.record_scopes]
        return out


@dataclasses.dataclass(frozen=True)
class OptionSpec:
    """One ProfilerConfig field as front ends see it: how to spell, parse and document it."""

    name: str
    kind: str
    annotation: str  # the field's type as written, for signatures and help
    optional: bool  # None is a valid value
    default: Any
    help: str
    flags: tuple[str, ...]  # the long flag first (--report-input-shapes), then aliases
    metavar: Optional[str]
    separator: Optional[str]  # list items: one value split on this, else the flag repeats


@functools.cache
def option_specs() -> tuple[OptionSpec, ...]:
    """Every capture option in declaration order."""
    hints = typing.get_type_hints(ProfilerConfig)
    specs = []
    for field in dataclasses.fields(ProfilerConfig):
        hint = hints[field.name]
        args = typing.get_args(hint)
        optional = type(None) in args
        if optional:
            hint = next(a for a in args if a is not type(None))
        kinds = {bool: KIND_FLAG, int: KIND_INT, float: KIND_FLOAT, tuple: KIND_LIST}
        kind = kinds[typing.get_origin(hint) or hint]
        meta = field.metadata
        specs.append(
            OptionSpec(
                name=field.name,
                kind=kind,
                annotation=str(field.type),
                optional=optional,
                default=field.default,
                help=meta["help"],
                flags=("--" + field.name.replace("_", "-"), *meta["aliases"]),
                metavar=meta["metavar"],
                separator=meta["separator"],
            )
        )
    return tuple(specs)


def option_names() -> tuple[str, ...]:
    return tuple(spec.name for spec in option_specs())


INT_OPTION_LIMIT: Final = 2**63
"""Integer options are kept as int64 by the recorder: a value must be below this in magnitude."""


def _check_type(spec: OptionSpec, value: object) -> None:
    """Scalars by kind; KIND_LIST values are checked item by item where they are converted."""
    if value is None and spec.optional:
        return
    expected = {KIND_FLAG: (bool,), KIND_INT: (int,), KIND_FLOAT: (int, float)}.get(spec.kind)
    if expected is None:
        return
    if not isinstance(value, expected) or (spec.kind != KIND_FLAG and isinstance(value, bool)):
        what = {KIND_FLAG: "a bool", KIND_INT: "an int", KIND_FLOAT: "a number"}[spec.kind]
        raise RecfnTypeError(f"ProfilerConfig.{spec.name} must be {what}, got {value!r}")
    if isinstance(value, int) and not -INT_OPTION_LIMIT <= value < INT_OPTION_LIMIT:
        raise RecfnValueError(
            f"ProfilerConfig.{spec.name} must fit in 64 bits (at most {INT_OPTION_LIMIT - 1}), "
            f"got {value}"
        )


def document_options(target: Any, *leading: inspect.Parameter) -> Any:
    """Give ``target`` (a callable taking ``**options``) a signature and docstring listing every
    option, so ``help()`` and editors show them; ``leading`` parameters come first."""
    params = [
        *leading,
        inspect.Parameter(
            "config",
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation="Optional[ProfilerConfig]",
        ),
        *(
            inspect.Parameter(
                spec.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=spec.default,
                annotation=spec.annotation,
            )
            for spec in option_specs()
        ),
    ]
    target.__signature__ = inspect.Signature(params)
    lines = [f"    {spec.name} ({spec.default!r}): {spec.help}" for spec in option_specs()]
    doc = inspect.cleandoc(target.__doc__ or "")
    target.__doc__ = (
        f"{doc}\n\nOptions (keyword-only; ``config=ProfilerConfig(...)`` gives them at once, and "
        "options given beside it override it):\n\n" + "\n".join(lines) + "\n"
    )
    return target
