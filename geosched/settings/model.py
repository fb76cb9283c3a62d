"""Every setting's type, default, help and check, declared once as a pydantic-settings model (`Values`): one field per
setting, named as its config file key with `_` for the dot (`weights.cost` is `weights_cost`), read from its
environment variable by alias. geosched.settings.names holds the names (key, variable, option) the CLI binds
on `-h`, which must not import pydantic (tests/test_cli_startup.py); this module is imported when a value is read.

The checks are the functions below (each raises ValueError with the reason, which becomes the one line naming the file
or variable and the key); a value from the environment is text, one from the file any YAML type, so each accepts both
(`names`: a YAML list or comma-separated text). pydantic-settings does no JSON decoding of variables
(`enable_decoding=False`): `GEOSCHED_REGIONS=us-east-1,eu-west-1` is two names, not a JSON document.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from geosched import clouds
from geosched.core.errors import InputError
from geosched.core.models import Weights as CoreWeights
from geosched.files import gate
from geosched.files.access import SSH_USER_RE, parse_admin_cidrs
from geosched.files.fields import describe
from geosched.policies import DEFAULT_POLICY
from geosched.settings.names import BY_KEY

# The output formats some command offers; `output` is refused in the file only when no command offers it.
OUTPUT_FORMATS = ("table", "wide", "json", "yaml", "csv", "md", "html")


# A value in an error line is described (geosched.files.fields.describe: its type, a string's first characters),
# never printed whole: a mapping given where a string goes may hold a key or a password (`gcp: {endpoint:
# {user: ..., password: ...}}`), and the line goes to a terminal, a CI log, a bug report.


def text(value: Any) -> str:
    if not isinstance(value, str | int | float | Path) or isinstance(value, bool) or not str(value).strip():
        raise ValueError(f"expected a non-empty string, got {describe(value)}")
    return str(value).strip()


def path(value: Any) -> Path:
    return Path(text(value)).expanduser()


def weight(value: Any) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        raise ValueError(f"expected a number, got {describe(value)}") from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"expected a finite number >= 0, got {describe(value)}")
    return number


def names(value: Any) -> tuple[str, ...]:
    """A YAML list, or comma-separated text as in the environment."""
    items = value if isinstance(value, list | tuple) else text(value).split(",")
    out = tuple(text(item) for item in items if not isinstance(item, str) or item.strip())
    if not out:
        raise ValueError("expected at least one name")
    return out


def flag(value: Any) -> bool:
    """A YAML boolean, or in the environment yes/no (true/false, 1/0, on/off, any case)."""
    if isinstance(value, bool):
        return value
    word = text(value).lower()
    if word in ("yes", "true", "1", "on"):
        return True
    if word in ("no", "false", "0", "off"):
        return False
    raise ValueError(f"expected yes or no, got {describe(value)}")


def one_of(choices: tuple[str, ...], value: Any) -> str:
    chosen = text(value)
    if chosen not in choices:
        raise ValueError(f"expected one of {', '.join(choices)}, got {describe(chosen)}"
                         f"{did_you_mean(chosen, choices)}")
    return chosen


def policy_name(value: Any) -> str:
    from geosched import policies

    return one_of(tuple(policies.names()), value)


def cidrs(value: Any) -> tuple[str, ...]:
    joined = ",".join(map(str, value)) if isinstance(value, list | tuple) else text(value)
    try:
        return parse_admin_cidrs(joined, "")
    except InputError as exc:
        raise ValueError(exc.reason) from None


def user_name(value: Any) -> str:
    name = text(value)
    if not SSH_USER_RE.match(name):
        raise ValueError(f"expected a Linux user name (a-z or _, then up to 31 of a-z, 0-9, _ and -), got "
                         f"{describe(name)}")
    return name


def limits(value: Any) -> str:
    """`kind=MiB,...`, or in the file a mapping `{trace: 4096}`; checked as gate checks it."""
    joined = ",".join(f"{k}={v}" for k, v in value.items()) if isinstance(value, dict) else text(value)
    try:
        gate.parse_limits(joined, "")
    except InputError as exc:
        raise ValueError(f"{exc.field + ': ' if exc.field else ''}{exc.reason}") from None
    return joined


def did_you_mean(word: str, known: Any) -> str:
    close = difflib.get_close_matches(word, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


Text = Annotated[str, BeforeValidator(text)]
PathValue = Annotated[Path, BeforeValidator(path)]
Weight = Annotated[float, BeforeValidator(weight)]
Names = Annotated[tuple[str, ...], BeforeValidator(names)]
Flag = Annotated[bool, BeforeValidator(flag)]


def setting(key: str, help: str, default: Any = None) -> Any:
    """The field of the setting `key`: its variable as geosched.settings names it (the alias pydantic-settings
    reads), its help (docs/settings.md, the schema) and its default."""
    return Field(default, validation_alias=BY_KEY[key].env, description=help)


_W = CoreWeights()


class Common(BaseSettings):
    """The settings of geosched itself as declared, and the checks every setting shares; `Values` adds each cloud's."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True, case_sensitive=True, enable_decoding=False,
                                      env_ignore_empty=True, validate_by_name=True, validate_by_alias=True)

    home: PathValue | None = setting("home", "State directory: the store, journals, leases.")
    output: Annotated[str, BeforeValidator(lambda v: one_of(OUTPUT_FORMATS, v))] = setting(
        "output", "Output format of every command that offers it (`-o`).", "table")
    policy: Annotated[str, BeforeValidator(policy_name)] = setting(
        "policy", "Placement policy of place, submit, simulate and the MultiKueue dispatcher (`--policy`).",
        DEFAULT_POLICY)
    weights_network: Weight = setting("weights.network", "Weight of the network term (`--network-weight`).",
                                      _W.network)
    weights_cost: Weight = setting("weights.cost", "Weight of the $ term (`--cost-weight`).", _W.cost)
    weights_carbon: Weight = setting("weights.carbon", "Weight of the carbon term (`--carbon-weight`).", _W.carbon)
    weights_zone_tolerance: Weight = setting(
        "weights.zone_tolerance", "A placement in fewer zones wins while its total is within this fraction of the "
        "best (`--zone-tolerance`).", _W.zone_tolerance)
    weights_spot_risk: Weight = setting(
        "weights.spot_risk", "Weight of spot interruption risk on spot prices, in provision's plan and a spot job's "
        "cost term; 0: price alone (`--risk-weight`).", _W.spot_risk)
    providers: Names | None = setting("providers", "Providers provision, sweep and check use (`--provider`).")
    regions: Names | None = setting(
        "regions", "Only these regions, for provision, sweep and catalog refresh (`--regions`).")
    admin_cidrs: Annotated[tuple[str, ...], BeforeValidator(cidrs)] | None = setting(
        "admin_cidrs", "Who may reach SSH (tcp 22) of machines launched without a Terraform network "
        "(`--admin-cidr`); none: provision refuses.")
    terraform_output: PathValue | None = setting(
        "terraform_output", "`terraform output -json` of geosched's modules to launch into (`--tf-output`); none: "
        "the default VPC/network.")
    inventory: PathValue | None = setting("inventory", "Inventory file of the ssh provider (`--inventory`).")
    ssh_public_key: PathValue | None = setting(
        "ssh.public_key", "SSH public key installed on new machines (`--ssh-key`).")
    ssh_user: Annotated[str, BeforeValidator(user_name)] = setting(
        "ssh.user", "User created on new machines, and probes log in as.", "geosched")
    input_limits: Annotated[str, BeforeValidator(limits)] | None = setting(
        "input_limits", "Size limits of input files per kind in MiB, e.g. trace=4096,fleet=512 "
        "(geosched/files/gate.py).")

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The variables of the mapping `from_variables` was given, nothing else (no .env, no secrets directory)."""
        return (init_settings, _Variables(settings_cls))

    def of_cloud(self, cloud: str) -> dict[str, Any]:
        """A cloud's settings by their names in its module (`regions`, not `aws_regions`)."""
        prefix = field_name(f"{cloud}.")
        return {name[len(prefix):]: value for name, value in self if name.startswith(prefix)}


# The variables `Values()` reads: none but inside `from_variables` (so `check`, which validates one value through the
# model, reads no variable).
_ENVIRONMENT: ContextVar[Mapping[str, str]] = ContextVar("geosched_settings_environment", default=MappingProxyType({}))


class _Variables(EnvSettingsSource):
    """pydantic-settings' environment source over a mapping instead of os.environ (the provider settings are pure:
    the CLI hands them the environment with the config file's values filled in)."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {name: value for name, value in _ENVIRONMENT.get().items() if value.strip()}  # blank: unset


@contextmanager
def _reading(env: Mapping[str, str]) -> Iterator[None]:
    token = _ENVIRONMENT.set(env)
    try:
        yield
    finally:
        _ENVIRONMENT.reset(token)


def field_name(key: str) -> str:
    return key.replace(".", "_")


# What a cloud's CloudSetting.check names, as a field type (a cloud module declares data, not pydantic types).
_CHECKS: dict[str, Any] = {"text": Text | None, "names": Names | None, "flag": Flag}


def _cloud_fields() -> dict[str, Any]:
    return {field_name(f"{spec.name}.{s.name}"): (_CHECKS[s.check], setting(f"{spec.name}.{s.name}", s.help, s.default))
            for spec in clouds.all_specs() for s in spec.settings}


# Every setting: geosched's own and, field by field, each cloud's from its module (geosched.clouds).
Values: type[Common] = create_model("Values", __base__=Common, **_cloud_fields())


def field(key: str) -> FieldInfo:
    return Values.model_fields[field_name(key)]


def from_variables(env: Mapping[str, str]) -> Common:
    """Every setting from the variables of `env` (unset or empty: the default); a bad value is one InputError naming
    the variable."""
    with _reading(env):
        try:
            return Values()
        except ValidationError as exc:
            error = exc.errors()[0]
            raise InputError(str(error["loc"][0]), "", reason(error)) from None


def check(key: str, value: Any, source: str, field_path: str) -> Any:
    """One setting's value (text from a variable, any YAML type from the file), or an InputError naming `source` and
    `field_path` (the key in a file; "" for a variable, which names the setting itself)."""
    name = field_name(key)
    try:
        return getattr(Values.model_validate({name: value}), name)  # the others keep their defaults, unchecked
    except ValidationError as exc:
        raise InputError(source, field_path, reason(exc.errors()[0])) from None


def reason(error: Any) -> str:
    """The check's own words (our ValueError), else pydantic's message."""
    cause = (error.get("ctx") or {}).get("error")
    return str(cause) if isinstance(cause, ValueError) else str(error["msg"])


def schema() -> dict[str, Any]:
    return Values.model_json_schema(by_alias=False)
