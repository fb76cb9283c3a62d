"""Every setting of geosched in one table: its key in the config file, its environment variable, its built-in
default and what it does (docs/settings.md is generated from `SETTINGS` by scripts/settings-docs).

Where a value comes from, first found: the command-line flag, the environment variable, the config file, the
built-in default. The config file is YAML, at `$GEOSCHED_CONFIG`, else `config.yaml` in the platform's user
config directory (`platformdirs.user_config_dir("geosched")`, on Linux `~/.config/geosched/config.yaml`):

    output: json
    weights: {cost: 0.2, zone_tolerance: 0.1}
    admin_cidrs: [203.0.113.0/24]
    aws: {regions: [us-east-1, us-west-2]}

A setting with an `option` supplies that option's default on every command that has it: `bind` gives the
option its environment variable (click reads it) and `default_map` gives click the config file's values (its
context `default_map`), so click's own precedence applies. `output` applies only where the command offers the
format. The other settings are read by the library (`lookup`, or `environ` for the provider settings, which
take the environment as a mapping).

A bad file or value is an InputError naming the file (or variable), the key and the reason: exit 2.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from geosched.core.errors import InputError
from geosched.core.models import Weights
from geosched.files import gate
from geosched.policies import DEFAULT_POLICY

CONFIG_ENV = "GEOSCHED_CONFIG"
CONFIG_NAME = "config.yaml"
# The output formats some command offers; `output` is refused in the file only when no command offers it.
OUTPUT_FORMATS = ("table", "wide", "json", "yaml", "csv", "md", "html")

Parse = Callable[[Any], Any]  # a value from the file (any YAML type) or the environment (text) -> the value


@dataclass(frozen=True)
class Setting:
    key: str  # in the config file; a dot is a nesting level (`weights.cost` is `weights: {cost: ...}`)
    env: str
    default: Any  # None: not set
    help: str
    parse: Parse
    option: str | None = None  # the CLI option (its parameter name) whose default this is, on every command
    shown_default: str | None = None  # the default as the docs say it, when it depends on the machine


# --- parsers: each raises ValueError with the reason ----------------------------------------------------------

def text(value: Any) -> str:
    if not isinstance(value, str | int | float) or isinstance(value, bool) or not str(value).strip():
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return str(value).strip()


def path(value: Any) -> Path:
    return Path(text(value)).expanduser()


def weight(value: Any) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        raise ValueError(f"expected a number, got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"expected a finite number >= 0, got {value!r}")
    return number


def names(value: Any) -> tuple[str, ...]:
    """A YAML list, or comma-separated text as in the environment."""
    items = value if isinstance(value, list) else text(value).split(",")
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
    raise ValueError(f"expected yes or no, got {value!r}")


def one_of(*choices: str) -> Parse:
    def parse(value: Any) -> str:
        chosen = text(value)
        if chosen not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {chosen!r}{_did_you_mean(chosen, choices)}")
        return chosen
    return parse


def policy(value: Any) -> str:
    from geosched import policies

    return str(one_of(*policies.names())(value))


def cidrs(value: Any) -> tuple[str, ...]:
    from geosched.providers.config import parse_admin_cidrs

    joined = ",".join(map(str, value)) if isinstance(value, list) else text(value)
    try:
        return parse_admin_cidrs(joined, "")
    except InputError as exc:
        raise ValueError(exc.reason) from None


def limits(value: Any) -> str:
    """`kind=MiB,...`, or in the file a mapping `{trace: 4096}`; checked as gate checks it."""
    joined = ",".join(f"{k}={v}" for k, v in value.items()) if isinstance(value, dict) else text(value)
    try:
        gate.parse_limits(joined, "")
    except InputError as exc:
        raise ValueError(f"{exc.field + ': ' if exc.field else ''}{exc.reason}") from None
    return joined


_WEIGHTS = Weights()

SETTINGS: tuple[Setting, ...] = (
    Setting("home", "GEOSCHED_HOME", None, "State directory: the store, journals, leases.", path, option="home",
            shown_default="platformdirs.user_data_dir('geosched') (Linux: ~/.local/share/geosched)"),
    Setting("output", "GEOSCHED_OUTPUT", "table", "Output format of every command that offers it (`-o`).",
            one_of(*OUTPUT_FORMATS), option="output"),
    Setting("policy", "GEOSCHED_POLICY", DEFAULT_POLICY, "Placement policy of place, submit, simulate and the "
            "MultiKueue dispatcher (`--policy`).", policy, option="policy"),
    Setting("weights.network", "GEOSCHED_NETWORK_WEIGHT", _WEIGHTS.network, "Weight of the network term "
            "(`--network-weight`).", weight, option="network_weight"),
    Setting("weights.cost", "GEOSCHED_COST_WEIGHT", _WEIGHTS.cost, "Weight of the $ term (`--cost-weight`).",
            weight, option="cost_weight"),
    Setting("weights.carbon", "GEOSCHED_CARBON_WEIGHT", _WEIGHTS.carbon, "Weight of the carbon term "
            "(`--carbon-weight`).", weight, option="carbon_weight"),
    Setting("weights.zone_tolerance", "GEOSCHED_ZONE_TOLERANCE", _WEIGHTS.zone_tolerance, "A placement in fewer "
            "zones wins while its total is within this fraction of the best (`--zone-tolerance`).", weight,
            option="zone_tolerance"),
    Setting("weights.spot_risk", "GEOSCHED_RISK_WEIGHT", _WEIGHTS.spot_risk, "Weight of spot interruption risk on "
            "spot prices, in provision's plan and a spot job's cost term; 0: price alone (`--risk-weight`).", weight,
            option="risk_weight"),
    Setting("providers", "GEOSCHED_PROVIDERS", None, "Providers provision, sweep and check use (`--provider`).",
            names, option="provider", shown_default="aws,gcp"),
    Setting("regions", "GEOSCHED_REGIONS", None, "Only these regions, for provision, sweep and catalog refresh "
            "(`--regions`).", names, option="regions", shown_default="all"),
    Setting("admin_cidrs", "GEOSCHED_ADMIN_CIDRS", None, "Who may reach SSH (tcp 22) of machines launched "
            "without a Terraform network (`--admin-cidr`); none: provision refuses.", cidrs),
    Setting("terraform_output", "GEOSCHED_TERRAFORM_OUTPUT", None, "`terraform output -json` of geosched's "
            "modules to launch into (`--tf-output`); none: the default VPC/network.", path),
    Setting("inventory", "GEOSCHED_INVENTORY", None, "Inventory file of the ssh provider (`--inventory`).", path),
    Setting("ssh.public_key", "GEOSCHED_SSH_PUBLIC_KEY", None, "SSH public key installed on new machines "
            "(`--ssh-key`).", path, shown_default="~/.ssh/id_ed25519.pub, id_ecdsa.pub or id_rsa.pub"),
    Setting("ssh.user", "GEOSCHED_SSH_USER", "geosched", "User created on new machines, and probes log in as.",
            text),
    Setting("aws.regions", "GEOSCHED_AWS_REGIONS", None, "AWS regions geosched looks in (sweep, status, refresh).",
            names, shown_default="every region the account has"),
    Setting("aws.ami", "GEOSCHED_AWS_AMI", None, "AMI to launch.", text,
            shown_default="the newest 'Deep Learning*' AMI"),
    Setting("aws.key_name", "GEOSCHED_AWS_KEY_NAME", None, "EC2 key pair to launch with.", text),
    Setting("aws.eks_node_role", "GEOSCHED_EKS_NODE_ROLE", None, "IAM role ARN the nodes of an EKS node group "
            "geosched creates run as (`provision --cluster`, `--node-role`).", text),
    Setting("gcp.project", "GEOSCHED_GCP_PROJECT", None, "GCP project.", text),
    Setting("gcp.endpoint", "GEOSCHED_GCP_ENDPOINT", None, "Compute Engine API endpoint (an emulator, a "
            "private endpoint).", text, shown_default="Google's"),
    Setting("gcp.gke_endpoint", "GEOSCHED_GKE_ENDPOINT", None, "GKE (container) API endpoint for node pools "
            "(`provision --cluster --provider gcp`, `up`): an emulator, a private endpoint. An http:// endpoint is "
            "called without credentials.", text, shown_default="Google's"),
    Setting("gcp.image", "GEOSCHED_GCP_IMAGE", None, "Image to launch.", text,
            shown_default="Deep Learning VM family common-cu124-debian-11-py310"),
    Setting("gcp.public_ips", "GEOSCHED_GCP_PUBLIC_IPS", True, "Give VMs geosched launches on GCP an external "
            "address (no: reach them by internal address, from inside the VPC, a bastion or a VPN). With a "
            "Terraform network, the module's `public_ips` decides.", flag),
    Setting("input_limits", "GEOSCHED_INPUT_LIMITS", None, "Size limits of input files per kind in MiB, e.g. "
            "trace=4096,fleet=512 (geosched/files/gate.py).", limits, shown_default="per kind, README"),
)
BY_KEY: Mapping[str, Setting] = {s.key: s for s in SETTINGS}
HOME, OUTPUT, POLICY = BY_KEY["home"], BY_KEY["output"], BY_KEY["policy"]
ADMIN_CIDRS, TERRAFORM_OUTPUT, INVENTORY = BY_KEY["admin_cidrs"], BY_KEY["terraform_output"], BY_KEY["inventory"]
SSH_PUBLIC_KEY, SSH_USER = BY_KEY["ssh.public_key"], BY_KEY["ssh.user"]
AWS_REGIONS, AWS_AMI, AWS_KEY_NAME = BY_KEY["aws.regions"], BY_KEY["aws.ami"], BY_KEY["aws.key_name"]
EKS_NODE_ROLE = BY_KEY["aws.eks_node_role"]
GCP_PROJECT, GCP_ENDPOINT, GCP_IMAGE = BY_KEY["gcp.project"], BY_KEY["gcp.endpoint"], BY_KEY["gcp.image"]
GCP_PUBLIC_IPS = BY_KEY["gcp.public_ips"]
GKE_ENDPOINT = BY_KEY["gcp.gke_endpoint"]
INPUT_LIMITS = BY_KEY["input_limits"]


# --- the config file ------------------------------------------------------------------------------------------

def config_path(env: Mapping[str, str] | None = None) -> Path:
    """`$GEOSCHED_CONFIG`, else config.yaml in the user config directory."""
    given = (os.environ if env is None else env).get(CONFIG_ENV, "").strip()
    if given:
        return Path(given).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("geosched")) / CONFIG_NAME


_cache: dict[tuple[str, int, int], dict[str, Any]] = {}


def file_values(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The config file's settings by key, parsed; {} when there is none at the default place. A file named by
    $GEOSCHED_CONFIG must exist. Read once per version of the file."""
    where = config_path(env)
    explicit = bool((os.environ if env is None else env).get(CONFIG_ENV, "").strip())
    try:
        info = where.stat()
    except FileNotFoundError:
        if explicit:
            raise InputError(str(where), "", f"no such file (named by {CONFIG_ENV})") from None
        return {}
    except OSError as exc:
        raise InputError(str(where), "", f"cannot read: {exc.strerror or exc}") from None
    key = (str(where), info.st_mtime_ns, info.st_size)
    if key not in _cache:
        # The file's own input_limits do not apply to reading it: while it is read, only the environment counts.
        _cache[key] = {}
        try:
            _cache[key] = parse_file(gate.read_text(where, gate.Kind.SETTINGS), str(where))
        except BaseException:
            del _cache[key]
            raise
    return _cache[key]


def parse_file(content: str, source: str) -> dict[str, Any]:
    doc = gate.parse_yaml(content, source)
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise InputError(source, "", f"expected a mapping of settings, got {type(doc).__name__}")
    out: dict[str, Any] = {}
    for key, value in _flatten(doc, source):
        setting = BY_KEY.get(key)
        if setting is None:
            raise InputError(source, key, f"unknown setting{_did_you_mean(key, BY_KEY)} (known: docs/settings.md)")
        if value is None:
            continue
        try:
            out[key] = setting.parse(value)
        except ValueError as exc:
            raise InputError(source, key, str(exc)) from None
    return out


GROUPS = frozenset(k.rsplit(".", 1)[0] for k in BY_KEY if "." in k)


def _flatten(doc: dict[Any, Any], source: str, prefix: str = "") -> list[tuple[str, Any]]:
    pairs: list[tuple[str, Any]] = []
    for name, value in doc.items():
        key = f"{prefix}{name}"
        if not isinstance(name, str):
            raise InputError(source, key, "a setting's name must be text")
        if key in GROUPS:
            if not isinstance(value, dict):
                raise InputError(source, key, f"expected a mapping of {key}.* settings, got {value!r}")
            pairs.extend(_flatten(value, source, key + "."))
        else:
            pairs.append((key, value))
    return pairs


# --- looking a setting up --------------------------------------------------------------------------------------

def from_environment(setting: Setting, env: Mapping[str, str]) -> Any:
    """The setting's value in an environment (a mapping: no file is read), None when its variable is unset or
    empty; a bad value is an InputError naming the variable."""
    raw = env.get(setting.env, "")
    if not raw.strip():
        return None
    try:
        return setting.parse(raw)
    except ValueError as exc:
        raise InputError(setting.env, "", str(exc)) from None


def resolve(setting: Setting, env: Mapping[str, str] | None = None) -> tuple[Any, str]:
    """The value of a setting and where it came from: "env", "file" or "default"."""
    value = from_environment(setting, os.environ if env is None else env)
    if value is not None:
        return value, "env"
    found = file_values(env)
    if setting.key in found:
        return found[setting.key], "file"
    return setting.default, "default"


def lookup(setting: Setting, env: Mapping[str, str] | None = None) -> Any:
    return resolve(setting, env)[0]


def environ(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment as the provider settings read it (`providers.config.from_env`): every variable that is set,
    and for each unset one of the table the config file's value, written as its variable would be."""
    base = dict(os.environ if env is None else env)
    for key, value in file_values(env).items():
        var = BY_KEY[key].env
        if not base.get(var, "").strip():
            base[var] = ",".join(value) if isinstance(value, tuple) else str(value)
    return base


# --- the CLI's options -----------------------------------------------------------------------------------------

def _commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    out = [(path, command)]
    for name, sub in (getattr(command, "commands", None) or {}).items():
        out.extend(_commands(sub, (*path, name)))
    return out


def _options(command: Any, setting: Setting) -> list[Any]:
    return [p for p in command.params if supplies(setting, p)]


def supplies(setting: Setting, param: Any) -> bool:
    """Whether the setting gives this parameter its default: an option of the setting's name; a list setting only
    an option that takes several values (`catalog --provider`, a filter, is not `providers`)."""
    return (param.param_type_name == "option" and setting.option is not None and param.name == setting.option
            and (param.multiple or setting.parse is not names))


def supplying(param: Any) -> Setting | None:
    return next((s for s in SETTINGS if supplies(s, param)), None)


def choices(param: Any) -> tuple[str, ...] | None:
    """The values an option takes, when it is a choice: the formats of an `-o` (geosched.console.output.Formats), else
    the members of the Enum typer declares it with."""
    descriptor = getattr(param, "type_descriptor", None)
    formats = getattr(getattr(getattr(descriptor, "parameter_info", None), "parser", None), "formats", None)
    if isinstance(formats, tuple):
        return formats
    annotation = getattr(descriptor, "annotation", None)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return tuple(str(m.value) for m in annotation)
    return None


def bind(root: Any) -> None:
    """Give every option a setting supplies its environment variable, for click to read (and --help to show).
    `output` is left out: a format one command lacks must not fail it, so its variable goes through
    `default_map`, which keeps only the commands that offer the format."""
    for _, command in _commands(root):
        for setting in SETTINGS:
            if setting.option is None or setting is OUTPUT:
                continue
            for param in _options(command, setting):
                param.envvar = setting.env


def default_map(root: Any, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """click's context `default_map` for the command tree under `root`: the config file's value of every setting
    with an option, for each command that has the option (`output`: also the environment's, where offered)."""
    found = file_values(env)
    out: dict[str, Any] = {}
    for path, command in _commands(root):
        for setting in SETTINGS:
            if setting.option is None:
                continue
            value, origin = resolve(setting, env) if setting is OUTPUT else (found.get(setting.key), "file")
            if value is None or origin == "default":
                continue
            for param in _options(command, setting):
                offered = choices(param)
                if offered is not None and value not in offered:
                    continue
                level = out
                for name in path:
                    level = level.setdefault(name, {})
                level[param.name] = (list(value) if isinstance(value, tuple) else [value]) if param.multiple \
                    else value
    return out


def _did_you_mean(word: str, known: Any) -> str:
    close = difflib.get_close_matches(word, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# The gate (pure core) asks this module for its limits instead of importing it: the file's `input_limits` count too.
gate.use_limits_source(lambda env: lookup(INPUT_LIMITS, env) or "")
