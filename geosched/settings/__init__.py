"""Every setting of geosched by name: its key in the config file, its environment variable and the CLI option it
gives a default to. Its type, default, help and check are declared once in geosched.settings.model (a
pydantic-settings model, imported when a value is first read: `geosched -h` binds the names without pydantic);
docs/settings.md is generated from both by `python -m geosched.cli.clidoc`.

Where a value comes from, first found: the command-line flag, the environment variable, the config file, the
built-in default. The config file is YAML, at `$GEOSCHED_CONFIG`, else `config.yaml` in the platform's user
config directory (`platformdirs.user_config_dir("geosched")`, on Linux `~/.config/geosched/config.yaml`):

    output: json
    weights: {cost: 0.2, zone_tolerance: 0.1}
    admin_cidrs: [203.0.113.0/24]
    aws: {regions: [us-east-1, us-west-2]}   # a cloud's own settings: declared in its module, geosched/clouds

A setting with an `option` supplies that option's default on every command that has it: `bind` gives the
option its environment variable (click reads it) and `default_map` gives click the config file's values (its
context `default_map`), so click's own precedence applies; help reads no file (geosched.cli.main.asks_help).
`output` applies only where the command offers the format. The other settings are read by the library (`lookup`,
or `environ` for the provider settings, which take the environment as a mapping).

A bad file or value is an InputError naming the file (or variable), the key and the reason: exit 2.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any

from geosched.core.errors import InputError
from geosched.files import gate
from geosched.files.fields import describe_document
from geosched.settings.names import (
    ADMIN_CIDRS,
    BY_KEY,
    HOME,
    INPUT_LIMITS,
    INVENTORY,
    OUTPUT,
    POLICY,
    SETTINGS,
    SSH_PUBLIC_KEY,
    SSH_USER,
    TERRAFORM_OUTPUT,
    Setting,
    of_cloud,
)

# The names are declared in geosched.settings.names and read here as `settings.HOME` etc., as before the
# split (that module is apart so that settings_model, which this module imports, need not import this one).
__all__ = ["ADMIN_CIDRS", "BY_KEY", "HOME", "INPUT_LIMITS", "INVENTORY", "OUTPUT", "POLICY", "SETTINGS",
           "SSH_PUBLIC_KEY", "SSH_USER", "TERRAFORM_OUTPUT", "Setting", "of_cloud"]

CONFIG_ENV = "GEOSCHED_CONFIG"
CONFIG_NAME = "config.yaml"


def default_of(setting: Setting) -> Any:
    """The setting's built-in default, as geosched.settings.model declares it (imports pydantic)."""
    from geosched.settings import model as settings_model

    return settings_model.field(setting.key).default


def help_of(setting: Setting) -> str:
    from geosched.settings import model as settings_model

    return settings_model.field(setting.key).description or ""


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
    from geosched.settings.model import check, did_you_mean

    out: dict[str, Any] = {}
    for key, value in _flatten(doc, source):
        if key not in BY_KEY:
            raise InputError(source, key, f"unknown setting{did_you_mean(key, BY_KEY)} (known: docs/settings.md)")
        if value is not None:
            out[key] = check(key, value, source, key)
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
                raise InputError(source, key, f"expected a mapping of {key}.* settings, got "
                                 f"{describe_document(value)}")
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
    from geosched.settings.model import check

    return check(setting.key, raw, setting.env, "")


def resolve(setting: Setting, env: Mapping[str, str] | None = None) -> tuple[Any, str]:
    """The value of a setting and where it came from: "env", "file" or "default"."""
    return given(setting, env) or (default_of(setting), "default")


def given(setting: Setting, env: Mapping[str, str] | None = None) -> tuple[Any, str] | None:
    """The setting's value from its variable ("env"), else from the config file ("file"), else None. Reads no
    declaration when neither gives one (`geosched -h` imports no pydantic)."""
    value = from_environment(setting, os.environ if env is None else env)
    if value is not None:
        return value, "env"
    found = file_values(env)
    return (found[setting.key], "file") if setting.key in found else None


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
            and (param.multiple or not setting.many))


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
            value = (given(setting, env) or (None, ""))[0] if setting is OUTPUT else found.get(setting.key)
            if value is None:
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


# The gate (pure core) asks this module for its limits instead of importing it: the file's `input_limits` count too.
gate.use_limits_source(lambda env: lookup(INPUT_LIMITS, env) or "")
