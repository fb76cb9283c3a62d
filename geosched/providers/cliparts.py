"""What the provisioning commands share (`provision`, `up`, `--karpenter`): the state directory and provider
settings of the invocation, the option checks (`--provider`, `--gpu`, `--cluster`, `--region`), the providers with
credentials, the node group plan's table and the scrubbing of provider messages. Its own module so that
`geosched.providers.cli` and `geosched.providers.karpenter_cli` both import it and neither imports the other.

Imported on `geosched -h`: every import beyond typer and the registry is made inside the function that needs it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from geosched import settings as settings_table
from geosched.clouds import aws as aws_cloud
from geosched.console.output import Output
from geosched.providers import registry

if TYPE_CHECKING:
    from geosched.providers.base import Provider
    from geosched.providers.config import ProviderSettings
    from geosched.providers.nodegroups.backend import Target
    from geosched.providers.plan import Skipped


DEFAULT_PROVIDERS = registry.CLOUDS


def either(names: Sequence[str]) -> str:
    """`a, b or c`: a help text's choice among names the registry lists (a cloud added is named with no edit)."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


# Help texts of the commands that take clouds, from the registry.
PROVIDERS_TEXT = ",".join(DEFAULT_PROVIDERS)
# The IAM role of an EKS node group's nodes (`--node-role`'s default), a setting geosched.clouds.aws declares.
NODE_ROLE = settings_table.of_cloud(aws_cloud.NAME, "eks_node_role")


PLAN_ROWS = 15


def state_home(ctx: typer.Context) -> Path:
    from geosched.store.db import default_home
    home = ctx.find_root().params.get("home")
    return Path(home) if home else default_home()


def provider_settings(ctx: typer.Context, inventory: Path | None = None, ssh_key: Path | None = None,
              network: Path | None = None, admin_cidr: list[str] | None = None) -> ProviderSettings:
    from geosched.providers.config import from_env
    from geosched.settings import environ
    return from_env(environ(), state_home(ctx), public_key_path=ssh_key, inventory=inventory, network=network,
                    admin_cidrs=",".join(admin_cidr) if admin_cidr else None)


def split_names(values: list[str]) -> tuple[str, ...]:
    return tuple(v.strip() for item in values for v in item.split(",") if v.strip())


def parse_gpu(text: str) -> tuple[str, int]:
    from geosched.core import catalog, gpus
    from geosched.core.errors import InputError
    model, sep, count = text.partition(":")
    if not model:
        raise InputError("--gpu", "", f"expected MODEL:COUNT such as A100:8, got {text!r}")
    if sep and (not count.isdigit() or int(count) < 1):
        raise InputError("--gpu", "", f"count after ':' must be a positive integer, got {count!r}")
    try:
        resolved = gpus.resolve(model, catalog.gpu_models())
    except gpus.GpuNameError as exc:
        raise InputError("--gpu", "", str(exc)) from None
    return resolved, int(count) if sep else 8


def with_credentials(providers: dict[str, Provider]) -> dict[str, Provider]:
    """The providers that have credentials, checked before any prompt or launch (no API call): the others are
    left out with a line saying so; none left is exit 4."""
    from geosched.console import render
    from geosched.core.errors import CredentialsError
    missing = {name: next(i.detail for i in p.check() if i.item == "credentials" and not i.ok)
               for name, p in providers.items() if any(i.item == "credentials" and not i.ok for i in p.check())}
    for name, why in sorted(missing.items()):
        render.err.print(f"{name}: no credentials ({why}); left out", markup=False, highlight=False, soft_wrap=True)
    usable = {name: p for name, p in providers.items() if name not in missing}
    if not usable:
        raise CredentialsError(f"no credentials for {', '.join(sorted(missing))}: run `geosched check`")
    return usable


def build_providers(names: tuple[str, ...], settings: ProviderSettings) -> dict[str, Provider]:
    return registry.build(names or DEFAULT_PROVIDERS, settings)


# An EKS cluster name as CreateCluster allows it (EKS API reference, CreateCluster `name`: 1-100 characters,
# ^[0-9A-Za-z][A-Za-z0-9\-_]*). Checked before any call: the name goes into the request path
# (/clusters/{name}), so '' or '../x' reach another resource (a KeyError traceback, an HTML 404 as the error).
CLUSTER_NAME_RE = re.compile(r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}\Z")


def check_rendered_out(out: Path, header: str, writer: str) -> None:
    """The one rule of `up`'s and `provision`'s `--out` (what --karpenter or --provisioning-class renders for
    GitOps): create a file, or replace one that begins with `header`, the first line `writer` writes; anything else
    there (the job file itself, a hand-written manifest, a `gitops render` job, a link, a directory) is refused,
    one line, before any call. The file sits in a GitOps tree beside files that are not geosched's to overwrite.
    Read through the gate: the size is checked before a byte is read."""
    from geosched.core.errors import InputError, escape
    from geosched.files.gate import Kind, read_bytes

    if not out.is_symlink() and not out.exists():
        return
    where = escape(str(out))
    if out.is_symlink() or not out.is_file():
        raise InputError("--out", "", f"{where} is a link or not a regular file; {writer} writes a new file or "
                         "replaces one it wrote")
    if not read_bytes(out, Kind.MANIFEST).startswith(header.encode("utf-8")):
        raise InputError("--out", "", f"{where} holds something `{writer}` did not write (its first line is not "
                         "geosched's); move it away or choose another path")


def cluster_cloud(names: tuple[str, ...]) -> str:
    """The cluster's cloud: --provider aws (EKS, the default) or gcp (GKE); one of them."""
    from geosched.clouds import aws as aws_cloud
    from geosched.clouds import gcp as gcp_cloud
    from geosched.core.errors import InputError
    if not names:
        return aws_cloud.NAME
    if len(names) > 1 or names[0] not in (aws_cloud.NAME, gcp_cloud.NAME):
        raise InputError("--provider", "", "--cluster takes one provider, the cluster's cloud: aws (an EKS node "
                         "group) or gcp (a GKE node pool)")
    return names[0]


def cluster_region(regions: tuple[str, ...]) -> str:
    """A node group lives in its cluster's region: --region names it, else the AWS configuration's region."""
    from geosched.core.errors import InputError
    from geosched.providers.launchsettings.aws import AWS_REGION_RE
    if len(regions) > 1:
        raise InputError("--region", "", "--cluster takes one region, the cluster's")
    if regions:
        # Checked here: boto3 refuses a malformed region with its own InvalidRegionError, an exit 1.
        if not AWS_REGION_RE.fullmatch(regions[0]):
            raise InputError("--region", "", f"{regions[0][:40]!r} is not an AWS region name (such as us-east-1)")
        return regions[0]
    from geosched.providers.nodegroups.eks import Eks  # boto3: loaded when used (tests/test_cli_startup.py)

    region = Eks.default_region()
    if region is None:
        raise InputError("--region", "", "name the cluster's region (or set AWS_DEFAULT_REGION)")
    return region


def nodegroup_plan_rows(cluster: str, targets: Sequence[Target], nodes: int) -> list[dict[str, Any]]:
    return [{"rank": i, "cluster": t.cluster, "region": t.candidate.region, "zone": t.candidate.zone,
             "zone_name": t.zone_name, "subnet": t.where, "instance_type": t.candidate.instance_type,
             "nodes": nodes, "capacity_type": t.capacity_type, "usd_per_hour": t.candidate.usd_per_hour,
             "kgco2e_per_hour": None if t.candidate.gco2e_per_hour is None else t.candidate.gco2e_per_hour / 1000}
            for i, t in enumerate(targets, start=1)]


def show_nodegroup_plan(cluster: str, targets: Sequence[Target], skipped: Sequence[Skipped], nodes: int,
                         output: Output, no_headers: bool, dry_run: bool) -> None:
    from geosched.console import lists as kinds
    from geosched.console import render
    from geosched.console.output import emit_list
    caption = "dry run: the cluster was read; nothing was created" if dry_run else None
    emit_list(kinds.NODEGROUP_PLAN, nodegroup_plan_rows(cluster, targets, nodes), output, no_headers=no_headers,
              caption=caption)
    if output.tabular:
        for s in skipped[:PLAN_ROWS]:
            render.out.print(f"skipped {s.candidate.zone} {s.candidate.instance_type}: {plain(s.reason)}",
                             markup=False, highlight=False, soft_wrap=True)


# A provider's message in a table or document: long enough for any cloud's error text we have seen (GCE's
# ZONE_RESOURCE_POOL_EXHAUSTED is 170 characters with its zone), short of a page a hostile server could send.
MESSAGE_CHARS = 1000


def plain(text: str, limit: int = 140) -> str:
    # Provider messages are untrusted text: never let them be read as rich markup. And a live progress line is not
    # drawn through render's scrubbing console: a credential a server echoed is scrubbed here. A progress line
    # keeps 140 characters; tables wrap the message and keep MESSAGE_CHARS.
    from geosched.console import redact
    return unmarked(redact.scrub(text))[:limit]


def unmarked(text: str) -> str:
    return text.replace("[", "(").replace("]", ")")
