"""Options shared by every command that takes them (one declaration, so names, checks and help agree), and checks
on command-line options beyond what their types check."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from geosched.core.models import Weights
from geosched.grid.formats import Basis

# The one default of each weight, on every verb that takes it (geosched/settings/__init__.py: also from the environment
# and the config file).
DEFAULT_WEIGHTS = Weights()


@dataclass(frozen=True)
class Workload:
    """`geosched simulate --workload`: a generated workload instead of a trace file (`geosched.simulate.llm`); its
    load is relative to the GPUs of the replay's GPU model. Declared here, beside the options, because its fields
    are their defaults: the replay (geosched/cli/simulate.py, numpy) is imported only when the verb runs."""

    kind: str = "llm"
    jobs: int = 2000
    load: float = 0.8
    min_gpus: int = 16
    like: str = "kalos"
    seed: int = 0


def option_name(ctx: Any, param: Any) -> str:
    """The option as an error names it, with where its value came from when that was not the command line:
    `--cost-weight (from $GEOSCHED_COST_WEIGHT)`."""
    from geosched import settings
    name = max(param.opts, key=len) if param.opts else str(param.name)
    source = ctx.get_parameter_source(param.name) if ctx is not None and param.name else None
    if source is not None and source.name == "ENVIRONMENT" and isinstance(param.envvar, str):
        return f"{name} (from ${param.envvar})"
    if source is not None and source.name == "DEFAULT_MAP":
        return f"{name} (from {settings.config_path()})"
    return name


# The callbacks raise click's BadParameter: click names the option (and geosched.cli.main.usage_error where its value
# came from), and a sub-app run on its own exits 2 too.

def finite(value: float | None) -> float | None:
    """A float option's callback: click reads `inf`, `nan` and `1e400` as floats, and one infinite weight makes
    every score NaN (and the JSON output invalid); beyond the files' bound (`fields.MAX_NUMBER`) a product such as
    1e308 x a price overflows to infinity the same way."""
    from geosched.files.fields import MAX_NUMBER
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(not_finite(value))
    if value is not None and abs(value) > MAX_NUMBER:
        raise typer.BadParameter(f"expected at most {MAX_NUMBER:g}, got {value:g}")
    return value


def not_finite(value: object) -> str:
    return f"expected a finite number, got {value}"


# The bounds typer checks itself (an option's min and max, pydantic's ge/le), before the callback sees the value.
_BOUND_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})


def bound_of_non_finite(exc: Exception) -> str | None:
    """The reason for a float option's usage error when its value is NaN or infinite: `finite`'s words. typer checks
    the option's bounds before its callback runs, and NaN fails every bound (`-inf` the lower, `1e400` the upper),
    so without this `--cost-weight nan` (or GEOSCHED_COST_WEIGHT=nan) was told "Input should be greater than or
    equal to 0". None for any other error."""
    cause = exc.__cause__
    errors = getattr(cause, "errors", None)
    if not callable(errors):
        return None
    try:
        first = errors()[0]
        raw = first.get("input")
        number = float(raw)
    except (TypeError, ValueError, IndexError, AttributeError):
        return None
    if first.get("type") not in _BOUND_ERRORS or math.isfinite(number):
        return None
    return not_finite(raw)


def complete_policy(incomplete: str) -> list[tuple[str, str]]:
    """Shell completion of --policy: the registered names that start with what was typed, with their
    descriptions (zsh and fish show them; bash offers the names)."""
    from geosched import policies
    return [(name, policies.description(name)) for name in policies.names() if name.startswith(incomplete)]


def duration_s(value: str | None) -> float | None:
    """The callback of a duration option: 90m, 6h, 2d or seconds, in seconds (None: not given)."""
    if value is None:
        return None
    from geosched.files.decl.job import _DURATION_RE, _DURATION_UNIT_S, MAX_DURATION_S

    m = _DURATION_RE.match(value)
    if m is not None:
        seconds = float(m.group(1)) * _DURATION_UNIT_S[m.group(2)]
    else:
        try:
            seconds = float(value)
        except ValueError:
            raise typer.BadParameter(f"expected a duration such as 90m, 6h or 2d (or seconds), got {value!r}") from None
    if not 0 <= seconds <= MAX_DURATION_S:
        raise typer.BadParameter(f"must be from 0 to 366 days, got {value!r}")
    return seconds


def known_policy(value: Any) -> Any:
    """The callback of every --policy option (one name, or a list of them)."""
    from geosched import policies
    for name in [value] if isinstance(value, str) else value or ():
        if name not in policies.names():
            raise typer.BadParameter(f"unknown policy {name!r} (known: {', '.join(policies.names())})")
    return value


NetworkWeightOpt = Annotated[float, typer.Option(
    "--network-weight", callback=finite, min=0.0,
    help="Weight of the network term (predicted step time); network, cost and carbon weights are >= 0 and not all 0.")]
CostWeightOpt = Annotated[float, typer.Option(
    "--cost-weight", callback=finite, min=0.0,
    help="Weight of the $ term (the gang's $/h over the median's); >= 0, not all 0 with network and carbon.")]
CarbonWeightOpt = Annotated[float, typer.Option(
    "--carbon-weight", callback=finite, min=0.0,
    help="Weight of the carbon term (gCO2e/h over the median's); >= 0, not all 0 with network and cost.")]
RiskWeightOpt = Annotated[float, typer.Option(
    "--risk-weight", callback=finite, min=0.0,
    help="Weight of spot interruption risk on spot prices (0: price alone; policies/README.md, Spot risk).")]
ZoneToleranceOpt = Annotated[float, typer.Option(
    "--zone-tolerance", callback=finite, min=0.0, max=1.0,
    help="A placement in fewer zones wins while its total is within this fraction of the best (0 to 1; 0.05: "
         "within 5%).")]


def weights_rank(network: float, cost: float, carbon: float) -> None:
    """Every weight 0 makes every total 0: placements would be ranked by nothing. Refused in one line (issue 23)."""
    if network == 0 and cost == 0 and carbon == 0:
        raise typer.BadParameter("all three are 0: every candidate would score 0; give at least one a weight > 0",
                                 param_hint="--network-weight, --cost-weight, --carbon-weight")


def deprecated(new: str) -> Any:
    """The callback of a hidden option kept for one release under its old name: a one-line warning on stderr
    naming the new one, whenever the old one is used."""
    from geosched.console import render
    def warn(param: typer.CallbackParam, value: Any) -> Any:
        if value is not None:
            old = max(param.opts, key=len) if param.opts else str(param.name)
            render.err.print(f"warning: {old} is deprecated and goes away in the next release; use {new}",
                             markup=False, highlight=False, soft_wrap=True)
        return value
    return warn


def one_of(new: str, new_value: Any, old: str, old_value: Any) -> Any:
    """The value of an option given under its new or its deprecated name (not both)."""
    from geosched.core.errors import InputError
    if new_value is not None and old_value is not None:
        raise InputError(f"{new}/{old}", "", f"give {new} only ({old} is its deprecated name)")
    return new_value if new_value is not None else old_value


def given(ctx: typer.Context, name: str) -> bool:
    """Whether an option was given on the command line or by its environment variable (not a default, nor the
    config file's): for commands with a settings file of their own, which those two override."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")


# Grid carbon files (geosched/grid/carbon.py has the shapes): one declaration for every verb that reads them.
CarbonHourlyOpt = Annotated[list[Path] | None, typer.Option(
    "--carbon-hourly", help="Hourly grid intensity, repeatable: Electricity Maps' portal CSV or API JSON, WattTime's "
    "API JSON, or geosched's region CSV (shapes in geosched/grid/carbon.py). A job is placed at the hour it starts; a "
    "flexible job (schedule:) looks at the hours of its window.")]
CarbonForecastOpt = Annotated[list[Path] | None, typer.Option(
    "--carbon-forecast", help="A grid intensity forecast for the hours ahead (the same shapes), repeatable; "
    "without one, a flexible job's window is forecast from --carbon-hourly (the same hour's 7-day mean and the last "
    "hour's departure, grid/README.md).")]
CarbonBasisOpt = Annotated[Basis, typer.Option(
    "--carbon-basis", help="Which figures to read: lifecycle (Electricity Maps' LCA, its default), direct "
    "(combustion only) or marginal (WattTime's MOER). A file on another basis is an error.")]
GridZonesOpt = Annotated[Path | None, typer.Option(
    "--grid-zones", help="CSV provider,region,zone: the grid zone of each cloud region, over the shipped map "
    "(geosched/data/grid_zones.csv, Electricity Maps' data-centre table).")]
