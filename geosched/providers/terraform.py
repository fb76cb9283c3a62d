"""The network a provider launches into, read from `terraform output -json` of geosched's Terraform modules.

`terraform/examples/multi-region` (and any root module built the same way) has one output, `geosched`, that
gathers per provider and region what a launch needs:

    {"geosched": {"sensitive": false, "type": [...], "value": {
        "schema_version": 1,
        "aws": {"us-east-1": {"vpc_id": "vpc-...", "subnet_ids": {"use1-az1": "subnet-..."},
                              "security_group_id": "sg-...", "key_name": "...",
                              "placement_group_names": {"use1-az1": "..."}, "launch_tags": {"geosched-owner": "..."}}},
        "gcp": {"us-central1": {"project": "...", "network": "https://.../global/networks/...",
                                "subnetwork": "https://.../regions/us-central1/subnetworks/...",
                                "zones": ["us-central1-a"], "firewall_tag": "...", "placement_policy": null,
                                "service_account_email": "...", "launch_labels": {"geosched-owner": "..."}}}}}}

Every problem is one InputError naming the file, the field path (`geosched.value.aws.us-east-1.subnet_ids`) and
the reason. Values of an output marked sensitive never appear in errors, not even as path keys.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from geosched.core.errors import InputError
from geosched.files.gate import Kind, parse_json, read_bytes

OUTPUT_NAME = "geosched"
SCHEMA_VERSION = 1
# AWS's IAM policy and geosched's GCP listing both hinge on this key, so a config without it is unusable.
OWNER_KEY = "geosched-owner"


class RegionNetwork(Protocol):
    """What a launch in one region of a cloud needs, as its launch-settings module reads it
    (geosched.providers.launchsettings.<cloud>)."""

    @property
    def region(self) -> str: ...

    @property
    def zones(self) -> tuple[str, ...]: ...

    # The tags (labels) its launches carry, with OWNER_KEY among them, and their field's name in the output.
    @property
    def owner_tags(self) -> Mapping[str, str]: ...

    @property
    def owner_field(self) -> str: ...

    # Why the owner must agree, said when it does not.
    @property
    def owner_why(self) -> str: ...

    def subnet_for(self, zone: str) -> str | None: ...


@dataclass(frozen=True, slots=True)
class CloudNetwork:
    """How one cloud's section of the output (`value.<name>`: region name -> region settings) is read; each cloud's
    launch-settings module defines its own (`NETWORK`)."""

    name: str
    # A region name of the cloud, and how the error says one ("an AWS region name such as us-east-1").
    region_re: re.Pattern[str]
    region_what: str
    # The fields of one region's object, as the Terraform module outputs them.
    fields: tuple[str, ...]
    read_region: Callable[[Reader, str, str, Any], RegionNetwork]


@dataclass(frozen=True, slots=True)
class NetworkConfig:
    """Per cloud (by its name: `aws`, `gcp`) and region, the network geosched's Terraform modules built."""

    source: str
    clouds: Mapping[str, Mapping[str, RegionNetwork]]
    # Terraform marked the output sensitive: callers should not log these values either.
    sensitive: bool = False
    # The output's name in `terraform output -json`, the head of every field path in errors.
    output: str = OUTPUT_NAME

    def regions(self, provider: str) -> Mapping[str, RegionNetwork]:
        """Region name to network for a cloud; empty for any other provider (ssh, on-prem)."""
        return self.clouds.get(provider, MappingProxyType({}))

    def region(self, provider: str, region: str) -> RegionNetwork | None:
        return self.regions(provider).get(region)

    def for_zone(self, provider: str, zone: str) -> RegionNetwork | None:
        """The region network with a subnet in `zone`, or None when Terraform did not provision that zone."""
        return next((r for r in self.regions(provider).values() if r.subnet_for(zone) is not None), None)

    def zones(self) -> tuple[tuple[str, str, str], ...]:
        """(provider, region, zone) for every zone geosched can launch in."""
        out: list[tuple[str, str, str]] = []
        for provider, regions in self.clouds.items():
            for name, net in regions.items():
                out.extend((provider, name, zone) for zone in net.zones)
        return tuple(out)


def check_owner(config: NetworkConfig, owner: str, providers: Iterable[str] | None = None) -> None:
    """The modules' `owner` must be this store's owner id (each cloud's region network says why: on AWS the IAM
    policy lets RunInstances and TerminateInstances through only with the tag geosched-owner = var.owner, so any
    other value makes every launch a denial; on GCP geosched lists and sweeps its VMs by that label). Every cloud of
    the output when `providers` is None. Checked before any API call."""
    for provider in config.clouds if providers is None else providers:
        for index, (name, net) in enumerate(config.regions(provider).items()):
            found = net.owner_tags.get(OWNER_KEY, "")
            if found == owner:
                continue
            region = f"<region #{index + 1}>" if config.sensitive else name
            what = "the value" if config.sensitive else repr(found)
            raise InputError(config.source, f"{config.output}.value.{provider}.{region}.{net.owner_field}.{OWNER_KEY}",
                             f"{what} is not this store's owner id {owner!r} ({net.owner_why}): set the Terraform "
                             f"modules' `owner` variable to {owner!r}, apply, and export `terraform output -json` "
                             "again")


def load_terraform_output(path: Path, clouds: Sequence[CloudNetwork], output: str = OUTPUT_NAME) -> NetworkConfig:
    """Read a file holding what `terraform output -json` printed, each cloud's section as `clouds` says
    (geosched.providers.launchsettings.networks(): every cloud's)."""
    raw = read_bytes(path, Kind.TERRAFORM)
    try:
        text = _decode(raw)
    except UnicodeDecodeError:
        reason = "not UTF-8 or UTF-16 text: expected the JSON of `terraform output -json`"
        raise InputError(str(path), "", reason) from None
    return read_terraform_output(text, clouds, str(path), output)


def read_terraform_output(text: str, clouds: Sequence[CloudNetwork], source: str = "<stdin>",
                          output: str = OUTPUT_NAME) -> NetworkConfig:
    """Parse the text `terraform output -json` printed (a file's content or stdin)."""
    if not text.strip():
        raise InputError(source, "", "empty: expected the JSON printed by `terraform output -json`")
    return parse_terraform_output(parse_json(text, source), clouds, source, output)


def parse_terraform_output(data: Any, clouds: Sequence[CloudNetwork], source: str,
                           output: str = OUTPUT_NAME) -> NetworkConfig:
    """Validate decoded `terraform output -json` and build the NetworkConfig from its `output` entry."""
    if not isinstance(data, Mapping):
        raise InputError(source, "(document)", f"expected the object `terraform output -json` prints, got "
                         f"{_kind(data)}")
    if output not in data:
        raise InputError(source, output, _missing_output_reason(data, output, _top_fields(clouds)))
    envelope = data[output]
    if not isinstance(envelope, Mapping) or "value" not in envelope:
        raise InputError(source, output, "expected an object with sensitive, type and value (as printed by "
                         "`terraform output -json`)")
    # The envelope is Terraform's format, not ours: extra keys a newer Terraform may add are not an error.
    sensitive = envelope.get("sensitive", False)
    if not isinstance(sensitive, bool):
        raise InputError(source, f"{output}.sensitive", f"expected true or false, got {_kind(sensitive, shown=True)}")
    reader = Reader(source, sensitive)
    return reader.config(envelope["value"], f"{output}.value", clouds)


def _top_fields(clouds: Sequence[CloudNetwork]) -> tuple[str, ...]:
    return ("schema_version", *(cloud.name for cloud in clouds))


def _all_empty(names: Sequence[str]) -> str:
    if len(names) == 1:
        return f"{names[0]} is empty"
    if len(names) == 2:
        return f"both {names[0]} and {names[1]} are empty"
    return f"all of {', '.join(names[:-1])} and {names[-1]} are empty"


def _decode(raw: bytes) -> str:
    # PowerShell's `>` writes UTF-16 with a byte-order mark; accept it rather than fail on a JSON error.
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return raw.decode("utf-16")
    return raw.decode("utf-8-sig")


def _missing_output_reason(data: Mapping[Any, Any], output: str, top_fields: tuple[str, ...]) -> str:
    if any(key in data for key in top_fields):
        return (f"no output named {output!r}; this looks like the bare value of `terraform output -json {output}`: "
                "give the whole `terraform output -json` instead")
    if not data:
        return f"no output named {output!r}: the state has no outputs (has `terraform apply` run?)"
    names = ", ".join(sorted(str(k) for k in data))
    return f"no output named {output!r} (outputs: {names})"


class Reader:
    """Field-by-field checks under one output; in sensitive mode errors show kinds, never values or keys. Each
    cloud's `read_region` reads its region objects with it."""

    def __init__(self, source: str, sensitive: bool) -> None:
        self.source = source
        self.sensitive = sensitive

    def fail(self, path: str, reason: str) -> InputError:
        return InputError(self.source, path, reason)

    def show(self, value: Any) -> str:
        return _kind(value) if self.sensitive else _kind(value, shown=True)

    def step(self, path: str, key: str, index: int) -> str:
        return f"{path}.<key #{index + 1}>" if self.sensitive else f"{path}.{key}"

    def quoted(self, text: str) -> str:
        return "" if self.sensitive else f" {text!r}"

    def obj(self, value: Any, path: str, fields: tuple[str, ...], nullable: tuple[str, ...] = (),
            optional: tuple[str, ...] = ()) -> dict[str, Any]:
        """An object with exactly `fields` (the `optional` ones may be absent: None), as a Terraform object
        constructor produces."""
        if not isinstance(value, Mapping):
            raise self.fail(path, f"expected an object, got {self.show(value)}")
        for index, key in enumerate(value):
            if key not in fields:
                raise self.fail(self.step(path, str(key), index), f"unknown field (known: {', '.join(fields)})")
        for key in fields:
            if key in optional and key not in value:
                continue
            if key not in value or (value[key] is None and key not in nullable):
                raise self.fail(f"{path}.{key}", "required")
        return {key: value.get(key) for key in fields}

    def entries(self, value: Any, path: str, expected: str) -> list[tuple[str, str, Any]]:
        """(key, path, item) for each entry of a JSON object (Terraform's maps and objects both print as one)."""
        if not isinstance(value, Mapping):
            raise self.fail(path, f"expected {expected}, got {self.show(value)}")
        return [(key, self.step(path, key, index), item) for index, (key, item) in enumerate(value.items())]

    # fullmatch, not match: the patterns end in `$`, which also matches before a final newline ("us-east-1\n").
    def key(self, key: str, path: str, pattern: re.Pattern[str], what: str) -> str:
        if not pattern.fullmatch(key):
            raise self.fail(path, f"expected {what} as this key" if self.sensitive
                            else f"expected {what}, got the key {key!r}")
        return key

    def string(self, value: Any, path: str, pattern: re.Pattern[str], what: str) -> str:
        if not isinstance(value, str):
            raise self.fail(path, f"expected {what}, got {self.show(value)}")
        if not pattern.fullmatch(value):
            raise self.fail(path, f"expected {what}, got {'another string' if self.sensitive else repr(value[:60])}")
        return value

    def string_map(self, value: Any, path: str, expected: str, key_re: re.Pattern[str], key_what: str,
                   value_re: re.Pattern[str], value_what: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, at, item in self.entries(value, path, expected):
            out[self.key(key, at, key_re, key_what)] = self.string(item, at, value_re, value_what)
        return out

    def config(self, value: Any, path: str, clouds: Sequence[CloudNetwork]) -> NetworkConfig:
        # A cloud's section may be absent: that cloud has no regions. An output made by Terraform modules older
        # than a cloud geosched has learnt (or a root module that uses some clouds only) still reads; `no regions`
        # below still refuses an output that has none at all.
        top = self.obj(value, path, _top_fields(clouds), optional=tuple(cloud.name for cloud in clouds))
        version = top["schema_version"]
        if isinstance(version, bool) or not isinstance(version, int):
            raise self.fail(f"{path}.schema_version", f"expected an integer, got {self.show(version)}")
        if version != SCHEMA_VERSION:
            # The version is ours, not the user's data: safe to show even in sensitive mode.
            raise self.fail(f"{path}.schema_version", f"unsupported schema version {version} (this geosched reads "
                            f"{SCHEMA_VERSION}): update geosched or the Terraform modules so they match")
        parsed: dict[str, Mapping[str, RegionNetwork]] = {}
        for cloud in clouds:
            section = {} if cloud.name not in value else top[cloud.name]
            entries = self.region_entries(section, f"{path}.{cloud.name}", cloud.region_re, cloud.region_what)
            parsed[cloud.name] = MappingProxyType({key: cloud.read_region(self, key, at, item)
                                                   for key, at, item in entries})
        if not any(parsed.values()):
            raise self.fail(path, f"no regions: {_all_empty([cloud.name for cloud in clouds])}")
        self.unique_zones(path, parsed)
        return NetworkConfig(source=self.source, clouds=MappingProxyType(parsed), sensitive=self.sensitive,
                             output=path.split(".", 1)[0])

    def region_entries(self, value: Any, path: str, pattern: re.Pattern[str],
                       what: str) -> list[tuple[str, str, Any]]:
        entries = self.entries(value, path, "an object of region name to region settings")
        for key, at, _ in entries:
            self.key(key, at, pattern, what)
        return entries

    def unique_zones(self, path: str, clouds: Mapping[str, Mapping[str, RegionNetwork]]) -> None:
        # Zone names identify a zone fleet-wide (AWS zone IDs, GCP zone names), so one zone in two regions is a
        # copy-paste error that would send launches to the wrong subnet.
        seen: dict[str, str] = {}
        for provider, regions in clouds.items():
            for name, net in regions.items():
                for zone in net.zones:
                    here = f"{provider}.{name}"
                    if zone in seen:
                        if self.sensitive:
                            raise self.fail(path, "a zone is listed under two regions")
                        raise self.fail(f"{path}.{here}", f"zone {zone!r} is also listed under {seen[zone]}")
                    seen[zone] = here


def _kind(value: Any, shown: bool = False) -> str:
    """A value's JSON kind, with the value itself only when `shown` (never for sensitive outputs)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})" if shown else "a boolean"
    if isinstance(value, int | float):
        return f"a number ({value})" if shown else "a number"
    if isinstance(value, str):
        return f"a string ({value[:60]!r})" if shown else "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__
