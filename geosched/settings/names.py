"""Every setting of geosched by name: its key in the config file, its environment variable and the CLI option it
gives a default to. Data only, without pydantic: `geosched -h` binds these names (geosched.settings.bind)
and imports no declaration. The type, default, help and check of each are declared in
geosched.settings.model, which reads its variable names from here; geosched.settings reads a
value through both. Kept apart from both so neither imports the other's importer (no module cycle).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from geosched import clouds


@dataclass(frozen=True)
class Setting:
    key: str  # in the config file; a dot is a nesting level (`weights.cost` is `weights: {cost: ...}`)
    env: str
    option: str | None = None  # the CLI option (its parameter name) whose default this is, on every command
    shown_default: str | None = None  # the default as the docs say it, when it depends on the machine
    many: bool = False  # a list: gives a default only to an option that takes several values


def _of_clouds() -> tuple[Setting, ...]:
    """Each cloud's settings, as its module declares them (geosched.clouds: `CloudSpec.settings`), keyed
    `<cloud>.<name>`: a cloud's settings live in its module, not here."""
    return tuple(Setting(f"{spec.name}.{s.name}", s.env, None, s.shown_default)
                 for spec in clouds.all_specs() for s in spec.settings)


S = Setting
SETTINGS: tuple[Setting, ...] = (
    S("home", "GEOSCHED_HOME", "home", "platformdirs.user_data_dir('geosched') (Linux: ~/.local/share/geosched)"),
    S("output", "GEOSCHED_OUTPUT", "output"),
    S("policy", "GEOSCHED_POLICY", "policy"),
    S("weights.network", "GEOSCHED_NETWORK_WEIGHT", "network_weight"),
    S("weights.cost", "GEOSCHED_COST_WEIGHT", "cost_weight"),
    S("weights.carbon", "GEOSCHED_CARBON_WEIGHT", "carbon_weight"),
    S("weights.zone_tolerance", "GEOSCHED_ZONE_TOLERANCE", "zone_tolerance"),
    S("weights.spot_risk", "GEOSCHED_RISK_WEIGHT", "risk_weight"),
    S("providers", "GEOSCHED_PROVIDERS", "provider", "aws,gcp", many=True),
    S("regions", "GEOSCHED_REGIONS", "regions", "all", many=True),
    S("admin_cidrs", "GEOSCHED_ADMIN_CIDRS"),
    S("terraform_output", "GEOSCHED_TERRAFORM_OUTPUT"),
    S("inventory", "GEOSCHED_INVENTORY"),
    S("ssh.public_key", "GEOSCHED_SSH_PUBLIC_KEY", None, "~/.ssh/id_ed25519.pub, id_ecdsa.pub or id_rsa.pub"),
    S("ssh.user", "GEOSCHED_SSH_USER"),
    *_of_clouds(),
    S("input_limits", "GEOSCHED_INPUT_LIMITS", None, "per kind, README"),
)
BY_KEY: Mapping[str, Setting] = {s.key: s for s in SETTINGS}
HOME, OUTPUT, POLICY = BY_KEY["home"], BY_KEY["output"], BY_KEY["policy"]
ADMIN_CIDRS, TERRAFORM_OUTPUT, INVENTORY = BY_KEY["admin_cidrs"], BY_KEY["terraform_output"], BY_KEY["inventory"]
SSH_PUBLIC_KEY, SSH_USER = BY_KEY["ssh.public_key"], BY_KEY["ssh.user"]
INPUT_LIMITS = BY_KEY["input_limits"]


def of_cloud(cloud: str, name: str) -> Setting:
    """The setting `name` a cloud declares (`of_cloud(gcp.NAME, "project")`)."""
    return BY_KEY[f"{cloud}.{name}"]
