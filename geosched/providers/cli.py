"""`geosched provision | down | status | check | sweep` and `catalog refresh`: parse, call the library, print.

Register with `app.add_typer(providers.cli.app)` (the commands join the top level) and attach
`catalog_refresh` to a `catalog` group. The store directory comes from the root `--home` option.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from geosched import settings as settings_table
from geosched.clouds import aws as aws_cloud
from geosched.console.options import DEFAULT_WEIGHTS, CarbonWeightOpt, CostWeightOpt, RiskWeightOpt, deprecated, finite
from geosched.console.output import NoHeadersOpt, Output, OutputOpt
from geosched.providers import registry
from geosched.providers.cliparts import (
    CLUSTER_NAME_RE,
    DEFAULT_PROVIDERS,
    MESSAGE_CHARS,
    NODE_ROLE,
    PLAN_ROWS,
    PROVIDERS_TEXT,
    build_providers,
    cluster_cloud,
    cluster_region,
    either,
    parse_gpu,
    plain,
    provider_settings,
    show_nodegroup_plan,
    split_names,
    state_home,
    unmarked,
    with_credentials,
)

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from geosched.core.models import Weights
    from geosched.files.decl.provisioning import Attempt, Offer, OnDemandNetwork
    from geosched.policies.spotrisk import Rework
    from geosched.providers import journal
    from geosched.providers.base import Provider
    from geosched.providers.config import ProviderSettings
    from geosched.providers.gang import Event, ProvisionResult
    from geosched.providers.nodegroups.backend import Backend, Target
    from geosched.providers.nodegroups.launch import BackendFor, GroupResult, Join, Precheck, Until
    from geosched.providers.nodegroups.sites import Site
    from geosched.providers.nodegroups.spec import CapacityBlock
    from geosched.providers.nodegroups.sweep import Place
    from geosched.providers.plan import Candidate, Plan, PricingMode, Skipped
    from geosched.providers.terraform import NetworkConfig
    from geosched.store.db import Store

app = typer.Typer(no_args_is_help=True, help="Provision GPU gangs on clouds and inventories.")


def _check_admin_cidrs(settings: ProviderSettings, names: tuple[str, ...], allow_wide: bool) -> None:
    """Refuse, before any API call, to launch on a cloud without a Terraform network while nobody chose who may
    reach port 22 of the machines (exit 2, one line saying how); warn, one line, when the choice is wide (the
    world, or shorter than a /8) and --allow-wide-admin-cidr did not say it was meant."""
    from geosched.console import render
    from geosched.core.errors import InputError
    from geosched.providers.config import ADMIN_CIDRS_HOWTO, ENV_ADMIN_CIDRS, exposure, wide_admin_cidrs
    if settings.network is not None or not any(n in registry.CLOUDS for n in names):
        return  # the admin CIDRs open nothing: a Terraform network has its own rules, an inventory none
    if not settings.admin_cidrs:
        raise InputError(ENV_ADMIN_CIDRS, "", f"not set, and the machines would need an SSH rule: {ADMIN_CIDRS_HOWTO}")
    wide = wide_admin_cidrs(settings.admin_cidrs)
    if wide and not allow_wide:
        render.err.print(f"warning: SSH (tcp 22) of the new machines is open to {', '.join(map(exposure, wide))}, "
                         f"from {settings.admin_cidrs_from}: login is key-only, but anyone there can try; narrow it "
                         "to the networks you administer from, or pass --allow-wide-admin-cidr if you mean it",
                         soft_wrap=True)


TfOutputOption = Annotated[Path | None, typer.Option(
    "--tf-output", help="`terraform output -json` of geosched's Terraform modules: launch into its subnets "
    "(default: $GEOSCHED_TERRAFORM_OUTPUT, else the default VPC/network).")]
# `--network` is a NetworkView file on every other verb; here it was the Terraform output. Kept one release.
OldNetworkOption = Annotated[Path | None, typer.Option("--network", hidden=True, callback=deprecated("--tf-output"))]
AdminCidrOption = Annotated[list[str], typer.Option(
    "--admin-cidr", help="Who may reach SSH (tcp 22) of machines launched without a Terraform network; repeat "
    "or comma-separate (default: $GEOSCHED_ADMIN_CIDRS; none set: provision refuses; 0.0.0.0/0 opens it to "
    "the world).")]
AllowWideOption = Annotated[bool, typer.Option(
    "--allow-wide-admin-cidr", help="An admin CIDR wider than /8 (IPv4) or /16 (IPv6), 0.0.0.0/0 included, is "
    "meant: no warning.")]


def _check_network(settings: ProviderSettings, store: Store, names: tuple[str, ...]) -> None:
    """Refuse, before any API call, a network whose owner is not this store's or that fails its cloud's own checks
    (GCP: the project is not the configured one) (exit 2)."""
    from geosched.providers import journal, launchsettings
    from geosched.providers.terraform import check_owner
    net = settings.network
    if net is None:
        return
    check_owner(net, journal.owner(store), [n for n in names if n in registry.CLOUDS])
    for name, entry in launchsettings.registry().items():
        if name in names:
            entry.check_network(net, settings.of_cloud(name, entry.type))


def _pricing(spot: bool, on_demand: bool, auto: bool) -> PricingMode:
    from geosched.core.errors import InputError
    from geosched.providers.plan import PricingMode
    chosen = [m for flag, m in ((spot, PricingMode.SPOT), (on_demand, PricingMode.ON_DEMAND),
                                (auto, PricingMode.AUTO)) if flag]
    if len(chosen) > 1:
        raise InputError("--spot/--on-demand/--auto", "", "choose one market")
    return chosen[0] if chosen else PricingMode.ON_DEMAND


# --- provision ---------------------------------------------------------------------------------------

# `--karpenter` and its options, shared with `up` (providers/karpenter_cli.py).
DEFAULT_EXPIRE_AFTER = "720h"  # Karpenter's own default (nodegroups/karpenter.py)
KarpenterOpt = Annotated[bool, typer.Option(
    "--karpenter", help="With --cluster (EKS): render a Karpenter NodePool + EC2NodeClass for your GitOps in the "
    "zone chosen, instead of creating a managed node group; nothing is created.")]
KarpenterOutOpt = Annotated[Path | None, typer.Option(
    "--out", help="With --karpenter (default: stdout), or up's --provisioning-class (default: applied): write the "
    "YAML to this file for your GitOps: a new file, or one it wrote there before (anything else is refused).")]
CapacityBlockOpt = Annotated[int | None, typer.Option(
    "--capacity-block", metavar="HOURS", min=24, help="With --cluster (EKS): run the node group on a Capacity Block "
    "for ML of HOURS (whole days up to 14, or whole weeks up to 182 days) bought in the zone chosen: the first zone "
    "with an offering of the gang's type and size that starts within the hour (or "
    "--capacity-block-starts-within). Needs --buy-capacity-block: the block is paid up front and EC2 cannot cancel "
    "it.")]
BlockStartsWithinOpt = Annotated[float, typer.Option(
    "--capacity-block-starts-within", metavar="HOURS", min=0.0, max=8 * 7 * 24, help="With --capacity-block: buy "
    "a block that starts within HOURS (up to 8 weeks; EC2 sells most from 11:30 UTC on a later day). A block that "
    "starts more than an hour from now gets its node group at 0 nodes, scaled to the gang at the block's start and "
    "to 0 forty minutes before its end (scheduled actions on the group's Auto Scaling group); the command returns "
    "once they are set.")]
BuyCapacityBlockOpt = Annotated[bool, typer.Option(
    "--buy-capacity-block", help="Consent to buy the Capacity Block --capacity-block asks for (its whole fee, up "
    "front, not refundable; `down` deletes the node group, not the block).")]
AmiOpt = Annotated[str, typer.Option(
    "--ami", help="With --karpenter: the EKS-optimized image family, al2023 or bottlerocket (its NVIDIA variant "
    "for GPU instances).")]
DEFAULT_KARPENTER_ZONES = 3
KarpenterZonesOpt = Annotated[int, typer.Option(
    "--zones", min=1, max=100, help="With --karpenter: one NodePool in each of the plan's first ZONES zones the "
    "cluster holds, weighted in plan order, so Karpenter launches in the next when a zone has no capacity; with "
    "up, the job's pods are held to one zone (required pod affinity on topology.kubernetes.io/zone).")]
ExpireAfterOpt = Annotated[str, typer.Option(
    "--expire-after", help="With --karpenter: the longest a node of the pool lives (a duration such as 720h, or "
    "Never); Karpenter replaces it then, running gang or not.")]


@app.command(name="provision")
def provision_cmd(
    ctx: typer.Context,
    gpu: Annotated[str | None, typer.Option(help="GPU model and GPUs per node, e.g. A100:8.")] = None,
    nodes: Annotated[int | None, typer.Option(min=1, help="Nodes in the gang (all in one zone).")] = None,
    provider: Annotated[list[str], typer.Option(help=f"{either((*DEFAULT_PROVIDERS, 'ssh'))}; repeat "
                                                f"or comma-separate (default: {PROVIDERS_TEXT}).")] = [],  # noqa: B006
    regions: Annotated[list[str], typer.Option("--regions", "--region", help="Only these regions "
                                               "(comma-separated or repeated).")] = [],  # noqa: B006
    spot: Annotated[bool, typer.Option("--spot", help="Spot/preemptible capacity only.")] = False,
    on_demand: Annotated[bool, typer.Option("--on-demand", help="On-demand capacity only (default).")] = False,
    auto: Annotated[bool, typer.Option("--auto", help="Spot and on-demand in one ranking.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the ordered plan; call no launch API.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    resume_gang: Annotated[str | None, typer.Option("--resume", metavar="GANG",
                                                    help="Continue a gang after a crash.")] = None,
    name: Annotated[str | None, typer.Option(help="Gang name (default: generated).")] = None,
    parallel: Annotated[int, typer.Option(min=1, max=16, help="Zones tried at once.")] = 1,
    zone_timeout: Annotated[float, typer.Option(callback=finite, min=1.0, help="Seconds one zone may take.")] = 600.0,
    cost_weight: CostWeightOpt = DEFAULT_WEIGHTS.cost,
    carbon_weight: CarbonWeightOpt = DEFAULT_WEIGHTS.carbon,
    risk_weight: RiskWeightOpt = DEFAULT_WEIGHTS.spot_risk,
    checkpoint_minutes: Annotated[float, typer.Option(callback=finite, min=0.0, help="Minutes between the "
                                                      "job's checkpoints (spot rework).")] = 60.0,
    restart_minutes: Annotated[float, typer.Option(callback=finite, min=0.0, help="Minutes a restart after an "
                                                   "interruption takes.")] = 15.0,
    inventory: Annotated[Path | None, typer.Option(help="Inventory file for the ssh provider.")] = None,
    ssh_key: Annotated[Path | None, typer.Option(help="SSH public key to install (default: ~/.ssh/*.pub).")]
    = None,
    tf_output: TfOutputOption = None,
    old_network: OldNetworkOption = None,
    admin_cidr: AdminCidrOption = [],  # noqa: B006
    allow_wide_admin_cidr: AllowWideOption = False,
    cluster: Annotated[list[str], typer.Option(help="Make the gang a node group of this cluster instead of "
                                               "machines: an EKS managed node group (--provider aws, the default; "
                                               "the cluster's region: --region, else the AWS configuration's) or "
                                               "a GKE node pool (--provider gcp; --region: the cluster's "
                                               "location). Repeat to fail over to the next cluster when every "
                                               "zone of one refuses; --provider and --region then pair with the "
                                               "clusters in order (one value: for every cluster).")] = [],  # noqa: B006
    node_role: Annotated[str | None, typer.Option(help="With --cluster: the IAM role ARN the group's nodes run "
                                                  f"as (default: ${ENV_NODE_ROLE}).")] = None,
    karpenter: KarpenterOpt = False,
    out: KarpenterOutOpt = None,
    ami: AmiOpt = "al2023",
    expire_after: ExpireAfterOpt = DEFAULT_EXPIRE_AFTER,
    karpenter_zones: KarpenterZonesOpt = DEFAULT_KARPENTER_ZONES,
    capacity_block: CapacityBlockOpt = None,
    buy_capacity_block: BuyCapacityBlockOpt = False,
    capacity_block_starts_within: BlockStartsWithinOpt = 1.0,
    output: OutputOpt = Output.TABLE,
    no_headers: NoHeadersOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print each cloud call and decision to stderr "
                                          "as it happens (they go to HOME/logs/provision-GANG-TIME.log either "
                                          "way).")] = False,
) -> None:
    """Launch N nodes with the same GPUs in one zone, failing over zone -> region -> provider; with --cluster, as
    an EKS managed node group or GKE node pool of that cluster in the zone chosen (failing over zone by zone, then
    to the next --cluster).

    Every provision (and --resume) writes its log, each cloud call and decision, to
    HOME/logs/provision-GANG-TIME.log: attach it to a bug report (no credential is written to it)."""
    from geosched.console import render
    from geosched.console.options import one_of
    from geosched.core.errors import EXIT_NO_FIT, InputError
    from geosched.core.models import Weights
    from geosched.policies.spotrisk import Rework
    from geosched.providers import journal
    from geosched.providers.gang import ProvisionSettings, check_gang_name, new_gang_name, plan_gang, provision, resume
    from geosched.providers.plan import GangRequest
    from geosched.store.db import Store
    if karpenter and not cluster:
        raise InputError("--karpenter", "", "needs --cluster NAME, the EKS cluster Karpenter runs in")
    if (capacity_block is not None or buy_capacity_block) and (not cluster or karpenter):
        raise InputError("--capacity-block", "", "buys capacity for an EKS managed node group: use it with --cluster "
                         "NAME (not --karpenter)")
    if cluster and karpenter:
        if len(cluster) > 1:
            raise InputError("--cluster", "", "--karpenter renders the pool of one cluster: name one")
        if resume_gang:
            raise InputError("--resume", "", "--karpenter creates nothing, so there is nothing to resume")
        if gpu is None or nodes is None:
            raise InputError("--gpu/--nodes", "", "both are required")
        from geosched.providers.karpenter_cli import render_pool

        render_pool(ctx, cluster[0], node_role, gpu, nodes, _pricing(spot, on_demand, auto), provider, regions,
                    Weights(network=0.0, cost=cost_weight, carbon=carbon_weight, spot_risk=risk_weight),
                    Rework(checkpoint_minutes / 60.0, restart_minutes / 60.0), name, dry_run, output, no_headers, out,
                    ami, expire_after, karpenter_zones)
        return
    if cluster:
        if resume_gang:
            raise InputError("--resume", "", "a node group gang is not resumed: `geosched down` it and provision again")
        if gpu is None or nodes is None:
            raise InputError("--gpu/--nodes", "", "both are required")
        _provision_nodegroup(ctx, cluster, node_role, gpu, nodes, _pricing(spot, on_demand, auto), provider, regions,
                             Weights(network=0.0, cost=cost_weight, carbon=carbon_weight, spot_risk=risk_weight),
                             Rework(checkpoint_minutes / 60.0, restart_minutes / 60.0), name, dry_run, yes, output,
                             no_headers, verbose, capacity_block=capacity_block, buy_capacity_block=buy_capacity_block,
                             starts_within_h=capacity_block_starts_within)
        return
    settings = provider_settings(ctx, inventory, ssh_key, one_of("--tf-output", tf_output, "--network", old_network),
                         admin_cidr)
    psettings = ProvisionSettings(zone_timeout_s=zone_timeout, parallel=parallel,
                                  ssh_public_key=settings.ssh_public_key, ssh_user=settings.ssh_user,
                                  network=settings.network)
    with Store(state_home(ctx)) as store:
        if resume_gang:
            record = journal.gang_record(store, resume_gang)
            if record is None or record.request is None:
                raise InputError("--resume", "", f"no gang {resume_gang!r} in {store.path}")
            with _provision_log(ctx, resume_gang, verbose, output):
                _check_network(settings, store, record.request.providers or DEFAULT_PROVIDERS)
                _check_admin_cidrs(settings, record.request.providers or DEFAULT_PROVIDERS, allow_wide_admin_cidr)
                providers = build_providers(record.request.providers or DEFAULT_PROVIDERS, settings)
                result = _with_progress(output, lambda obs: resume(resume_gang, providers, store, psettings,
                                                                   observer=obs))
                _show_result(result, output, no_headers)
            return
        if gpu is None or nodes is None:
            raise InputError("--gpu/--nodes", "", "both are required (or --resume GANG)")
        model, per_node = parse_gpu(gpu)
        names = split_names(provider) or DEFAULT_PROVIDERS
        request = GangRequest(gpu=model, gpus_per_node=per_node, nodes=nodes, pricing=_pricing(spot, on_demand, auto),
                              providers=names, regions=split_names(regions),
                              weights=Weights(network=0.0, cost=cost_weight, carbon=carbon_weight,
                                              spot_risk=risk_weight),
                              rework=Rework(checkpoint_minutes / 60.0, restart_minutes / 60.0))
        if name:
            check_gang_name(name)
        gang = name or new_gang_name()
        with nullcontext() if dry_run else _provision_log(ctx, gang, verbose, output):
            _check_network(settings, store, names)
            _check_admin_cidrs(settings, names, allow_wide_admin_cidr)
            providers = build_providers(names, settings)
            if not dry_run:
                providers = with_credentials(providers)
            plan = plan_gang(request, providers, store, network=settings.network)
            if dry_run or not plan.candidates:
                _show_plan(plan, output, dry_run, ondemand=_ondemand(plan, settings, journal.owner(store)),
                           no_headers=no_headers)
                if not plan.candidates:
                    render.error(f"no offering holds {nodes} x {model}:{per_node} under these constraints")
                    raise typer.Exit(EXIT_NO_FIT)
                return
            if not yes:
                _show_plan(plan, Output.TABLE, False, limit=5)
                first = plan.candidates[0]
                typer.confirm(f"Launch {nodes} x {first.instance_type} (first choice "
                              f"${first.usd_per_hour:,.2f}/h)?", abort=True)
            result = _with_progress(output, lambda obs: provision(request, providers, store, psettings, gang=gang,
                                                                 observer=obs))
            _show_result(result, output, no_headers)


@contextmanager
def _provision_log(ctx: typer.Context, gang: str, verbose: bool, output: Output,
                   verb: str = "provision") -> Iterator[None]:
    """The provision's (or teardown's) log file (geosched/providers/provlog.py), and where it is said at the end:
    on stderr after a table (JSON and YAML runs are read by programs: their stderr stays as it was)."""
    from geosched.console import render
    from geosched.providers.provlog import provision_log
    with provision_log(state_home(ctx), gang, verbose=verbose, verb=verb) as path:
        try:
            yield
        finally:
            if output.tabular or verbose:
                render.err.print(f"{verb} log: {path}", markup=False, highlight=False, soft_wrap=True)


# --- provision --cluster: the gang as an EKS managed node group or a GKE node pool ----------------------

ENV_NODE_ROLE = NODE_ROLE.env
# `\Z`, not `$`: `$` also matches before a trailing newline, which a pasted ARN carries.
_ROLE_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}\Z")
# A GKE cluster name (projects.locations.clusters create, Cluster.name: lowercase letters, digits and '-', at most
# 40, starting with a letter, not ending with '-') and a location (a region such as us-central1 or a zone such as
# us-central1-a): both go into the request path.
_GKE_CLUSTER_RE = re.compile(r"^[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?\Z")
_GCP_LOCATION_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]{1,2}(?:-[a-z])?\Z")


def _provision_nodegroup(ctx: typer.Context, cluster_names: Sequence[str], node_role: str | None, gpu: str,
                         nodes: int, pricing: PricingMode, provider: list[str], regions: list[str], weights: Weights,
                         rework: Rework, name: str | None, dry_run: bool, yes: bool, output: Output,
                         no_headers: bool, verbose: bool = False, show_result: bool = True,
                         join: Join | None = None, capacity_block: int | None = None,
                         buy_capacity_block: bool = False, starts_within_h: float = 1.0,
                         until: Until | None = None) -> GroupResult | None:
    """The node group gang (`provision --cluster`, and the first step of `up`): the plan shown on a dry run (None
    returned), else the group created and its result, shown unless `show_result` is off (`up` shows its own).
    `join` (up): a group counts once its nodes are Ready in the cluster, else the next zone is tried.
    `--provider` says the cluster's cloud: aws (EKS, the default) or gcp (GKE). Several clusters: one plan over
    them all, tried cluster after cluster (nodegroups/sites.py)."""
    from geosched.console import render
    from geosched.core.errors import EXIT_NO_FIT
    from geosched.providers import lease
    from geosched.providers.gang import check_gang_name, new_gang_name

    # Imported here: the cloud clients need boto3 / google-cloud-container, which `geosched -h` must not load
    # (tests/test_cli_startup.py).
    from geosched.providers.nodegroups import launch as nodegroup_launch
    from geosched.providers.nodegroups import sites as nodegroup_sites
    from geosched.store.db import Store

    if name:
        check_gang_name(name)
    block = _capacity_block(capacity_block, buy_capacity_block, nodes, pricing, provider, dry_run, starts_within_h)
    with Store(state_home(ctx)) as store:
        plan, places, model, per_node = _nodegroup_sites(
            ctx, store, cluster_names, node_role, gpu, nodes, pricing, provider, regions, weights, rework, dry_run,
            capacity_block=block)
        targets = [t for p in places for t in p.targets]
        names = ", ".join(p.name for p in places)
        buying = "" if block is None else (
            f"; buy a Capacity Block of {nodes} x {targets[0].candidate.instance_type if targets else model} for "
            f"{block.hours} h in the first of these zones offering one that starts within "
            f"{block.start_within_h:g} h (its fee up front: EC2 cannot cancel it)"
            + ("; a block starting more than an hour from now: the node group at 0 nodes until its start, "
               "scaled then by scheduled actions" if block.start_within_h > 1 else ""))
        if dry_run or not targets:
            show_nodegroup_plan(names, targets, nodegroup_sites.skipped(places), nodes, output, no_headers, dry_run)
            if buying and output.tabular:
                render.err.print(f"with --buy-capacity-block, geosched would{buying[1:]}", markup=False,
                                 highlight=False, soft_wrap=True)
                for line in _block_quotes(places, nodes):
                    render.err.print(line, markup=False, highlight=False, soft_wrap=True)
            if not targets:
                render.error(f"no zone of cluster {names} holds {nodes} x {model}:{per_node} under these "
                             "constraints")
                raise typer.Exit(EXIT_NO_FIT)
            return None
        if not yes:
            show_nodegroup_plan(names, targets[:5], (), nodes, Output.TABLE, False, False)
            first = targets[0]
            typer.confirm(f"Create a {places[0].backend.kind} of {nodes} x {first.candidate.instance_type} in "
                          f"cluster {first.cluster} (first choice {first.candidate.zone}, "
                          f"${first.candidate.usd_per_hour:,.2f}/h){buying}?", abort=True)

        gang = name or new_gang_name()
        log = logging.getLogger("geosched.providers.nodegroups")

        def say(line: str) -> None:
            log.info("%s", line)  # the provisioning log's copy; -v prints the log's lines already
            if output.tabular and not verbose:
                # Whole (to a bound): a zone whose nodes never joined names the nodes and why (backend.NotJoined).
                render.err.print(plain(line, MESSAGE_CHARS), markup=False, highlight=False, soft_wrap=True)

        # A `down GANG` from another process meanwhile is refused (providers/lease.py); `up` holds it already.
        with lease.held(store, gang, "provision"), _provision_log(ctx, gang, verbose, output):
            result = nodegroup_launch.provision_across(plan, places, store, gang=gang, notify=say, join=join,
                                                       precheck=_quota_precheck(ctx, places, gang), until=until)
    if show_result:
        _show_nodegroup_result(result, nodes, output, no_headers)
    return result


def _block_quotes(places: Sequence[Site], nodes: int) -> list[str]:
    """A dry run's Capacity Block lines: per zone of the plan (the first PLAN_ROWS), the block it would buy, its
    start and its cost per hour (DescribeCapacityBlockOfferings, read only); one line saying why when the offerings
    cannot be read (the rights, the network): the plan above stands."""
    from geosched.providers.base import Budget, ProviderError
    from geosched.providers.nodegroups import spec
    from geosched.providers.nodegroups.eks import Eks

    lines: list[str] = []
    for p in places:
        if not isinstance(p.backend, Eks):
            continue
        targets = [t for t in p.targets if isinstance(t, spec.Target)][:PLAN_ROWS]
        budget = Budget(60.0, 30.0)
        try:
            lines.extend(q.line() for q in p.backend.quote(targets, nodes, budget))
        except ProviderError as error:
            lines.append(f"Capacity Block offerings of cluster {p.name} not read: {error.kind}: "
                         f"{plain(error.message)}")
    return lines


def _capacity_block(hours: int | None, buy: bool, nodes: int, pricing: PricingMode, provider: list[str],
                    dry_run: bool, starts_within_h: float = 1.0) -> CapacityBlock | None:
    """`--capacity-block HOURS` checked before any call: an EKS cluster's on-demand gang of a size and duration
    EC2 sells, and the user's consent to buy (not needed for a dry run, which buys nothing)."""
    from geosched.core.errors import InputError
    from geosched.providers.nodegroups.spec import CapacityBlock, block_problem
    from geosched.providers.plan import PricingMode

    if hours is None:
        if buy:
            raise InputError("--buy-capacity-block", "", "consents to buy what --capacity-block HOURS asks for: "
                             "name the hours")
        return None
    if any(p != aws_cloud.NAME for p in split_names(provider)):
        raise InputError("--capacity-block", "", "Capacity Blocks are EC2's: use it with EKS clusters "
                         "(--provider aws)")
    if pricing is not PricingMode.ON_DEMAND:
        raise InputError("--capacity-block", "", "a Capacity Block is its own market: not with spot (--spot, "
                         "--auto, or a job's pricing: spot)")
    problem = block_problem(hours, nodes)
    if problem is not None:
        raise InputError("--capacity-block", "", problem)
    if not buy and not dry_run:
        raise InputError("--buy-capacity-block", "", f"buying a Capacity Block of {nodes} nodes for {hours} h costs "
                         "its whole fee up front and EC2 cannot cancel it: add --buy-capacity-block to consent (or "
                         "--dry-run to see the plan)")
    return CapacityBlock(hours, starts_within_h)


def _quota_precheck(ctx: typer.Context, places: Sequence[Site], gang: str) -> Precheck:
    """launch.quota_precheck over the machine providers of the clusters' clouds."""
    from geosched.providers.nodegroups.launch import quota_precheck

    clouds = tuple(dict.fromkeys(p.backend.provider for p in places))
    return quota_precheck(build_providers(clouds, provider_settings(ctx)), gang)


def _nodegroup_targets(ctx: typer.Context, store: Store, cluster_name: str, node_role: str | None, gpu: str,
                       nodes: int, pricing: PricingMode, provider: list[str], regions: list[str], weights: Weights,
                       rework: Rework, dry_run: bool) -> tuple[Backend, Any, Plan, tuple[Target, ...],
                                                               tuple[Skipped, ...], str, int]:
    """The cluster's backend and its description, the gang's plan and the zones of the cluster it ranks, best
    first (with the candidates left out and why), the GPU model and GPUs per node: the zone
    `up --provisioning-class` asks a ProvisioningRequest for."""
    plan, (place,), model, per_node = _nodegroup_sites(ctx, store, [cluster_name], node_role, gpu, nodes, pricing,
                                                       provider, regions, weights, rework, dry_run)
    return place.backend, place.cluster, plan, place.targets, place.skipped, model, per_node


def _nodegroup_sites(ctx: typer.Context, store: Store, cluster_names: Sequence[str], node_role: str | None,
                     gpu: str, nodes: int, pricing: PricingMode, provider: list[str], regions: list[str],
                     weights: Weights, rework: Rework, dry_run: bool, *,
                     capacity_block: CapacityBlock | None = None) -> tuple[Plan, tuple[Site, ...], str, int]:
    """Every named cluster's backend, description and the zones of it the gang's one plan ranks, the clusters in
    the order they are tried (nodegroups/sites.py); the GPU model and GPUs per node. `--provider` and `--region`
    pair with the clusters in order, or give one value for all."""
    from geosched.core.errors import InputError
    from geosched.providers.gang import plan_gang
    from geosched.providers.nodegroups import launch as nodegroup_launch
    from geosched.providers.nodegroups import sites as nodegroup_sites
    from geosched.providers.plan import GangRequest

    clouds = _paired("--provider", split_names(provider), len(cluster_names))
    locations = _paired("--region", split_names(regions), len(cluster_names))
    if len(set(zip(cluster_names, clouds, locations, strict=True))) < len(cluster_names):
        raise InputError("--cluster", "", "names the same cluster twice")
    backends = [_cluster_backend(n, c, r, node_role, dry_run, capacity_block)
                for n, c, r in zip(cluster_names, clouds, locations, strict=True)]
    for backend, _ in backends:
        too_big = backend.size_problem(nodes)
        if too_big is not None:
            raise InputError("--nodes", "", too_big)
    model, per_node = parse_gpu(gpu)
    names = tuple(dict.fromkeys(b.provider for b, _ in backends))
    request = GangRequest(gpu=model, gpus_per_node=per_node, nodes=nodes, pricing=pricing, providers=names,
                          regions=tuple(dict.fromkeys(r for _, r in backends)), weights=weights, rework=rework)
    providers = build_providers(names, provider_settings(ctx))
    if not dry_run and aws_cloud.NAME in names:
        # GKE's credentials are the backend's own (an http:// emulator endpoint takes none): checked by its first
        # call, reading the cluster, before anything is created.
        providers = {**providers, **with_credentials({aws_cloud.NAME: providers[aws_cloud.NAME]})}
    plan = plan_gang(request, providers, store)
    places = [nodegroup_sites.site(plan, b, nodegroup_launch.read_cluster(b, n))
              for (b, _), n in zip(backends, cluster_names, strict=True)]
    return plan, nodegroup_sites.ordered(plan, places), model, per_node


_ONE_CLUSTER = {"--provider": "--cluster takes one provider, the cluster's cloud: aws (an EKS node group) or gcp "
                "(a GKE node pool)", "--region": "--cluster takes one region, the cluster's"}


def _paired(option: str, values: tuple[str, ...], clusters: int) -> tuple[str | None, ...]:
    """`--provider` / `--region` for each of the clusters: none given, one for all, or one per cluster."""
    from geosched.core.errors import InputError
    if not values:
        return (None,) * clusters
    if len(values) == 1:
        return values * clusters
    if len(values) == clusters:
        return values
    if clusters == 1 and option in _ONE_CLUSTER:
        raise InputError(option, "", _ONE_CLUSTER[option])
    raise InputError(option, "", f"give one value for every cluster or one per --cluster ({clusters}), got "
                     f"{len(values)}")


def _cluster_backend(cluster_name: str, provider: str | None, region_name: str | None, node_role: str | None,
                     dry_run: bool, capacity_block: CapacityBlock | None = None) -> tuple[Backend, str]:
    """One cluster's backend, its cloud and location checked before any call, and the region the plan looks in."""
    from geosched.clouds import gcp as gcp_cloud
    from geosched.core.errors import InputError
    from geosched.providers.nodegroups import gkespec
    from geosched.settings import environ

    cloud = cluster_cloud((provider,) if provider else ())
    regions = (region_name,) if region_name else ()
    if cloud == gcp_cloud.NAME:
        if not _GKE_CLUSTER_RE.match(cluster_name):
            raise InputError("--cluster", "", f"{cluster_name[:120]!r} is not a GKE cluster name (at most 40 "
                             "lowercase letters, digits and '-', starting with a letter)")
        location = _cluster_location(regions)
        from geosched.providers.nodegroups.gke import Gke

        return Gke(location), gkespec.region_of(location)
    if not CLUSTER_NAME_RE.match(cluster_name):
        raise InputError("--cluster", "", f"{cluster_name[:120]!r} is not an EKS cluster name (1-100 letters, "
                         "digits, '-' and '_', starting with a letter or digit)")
    region = cluster_region(regions)
    role = node_role or settings_table.from_environment(NODE_ROLE, environ())
    if not dry_run:
        if role is None:
            raise InputError("--node-role", "", f"required to create a node group: the IAM role ARN its nodes "
                             f"run as (or set {ENV_NODE_ROLE})")
        if not _ROLE_ARN_RE.match(role):
            raise InputError("--node-role", "", f"expected an IAM role ARN (arn:aws:iam::<account>:role/<name>), "
                             f"got {role!r}")
    from geosched.providers.nodegroups.eks import Eks

    return Eks(region, node_role=role, capacity_block=capacity_block), region


def _cluster_location(regions: tuple[str, ...]) -> str:
    """A GKE cluster is addressed by its location: --region names it (a region, or a zone for a zonal cluster)."""
    from geosched.core.errors import InputError
    if len(regions) != 1:
        raise InputError("--region", "", "--cluster with --provider gcp takes the cluster's location (a region such "
                         "as us-central1, or a zone for a zonal cluster)")
    if not _GCP_LOCATION_RE.fullmatch(regions[0]):
        raise InputError("--region", "", f"{regions[0][:40]!r} is not a GCP region or zone name (such as "
                         "us-central1 or us-central1-a)")
    return regions[0]


def _show_nodegroup_result(result: GroupResult, nodes: int, output: Output,
                           no_headers: bool) -> None:
    from geosched.console import lists as kinds
    from geosched.console.output import emit_list
    from geosched.core.errors import EXIT_NO_FIT
    t = result.target
    row = {"gang": result.gang, "state": result.state, "cluster": result.cluster,
           "zone": t.candidate.zone if t else None, "subnet": t.where if t else None,
           "nodegroup": result.group, "instance_type": t.candidate.instance_type if t else None, "nodes": nodes,
           "capacity_type": t.capacity_type if t else None, "usd_per_hour": t.candidate.usd_per_hour if t else None,
           "api_calls": result.api_calls, "message": plain(result.message, MESSAGE_CHARS)}
    if output.tabular:
        attempts_table(f"attempts for {result.gang}", attempt_rows(result.attempts), output is Output.WIDE)
    emit_list(kinds.NODEGROUPS, [row], output, no_headers=no_headers)
    if not result.ok:
        raise typer.Exit(EXIT_NO_FIT)


def _with_progress(output: Output, run: Any) -> ProvisionResult:
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from geosched.console import render
    if not output.tabular:
        result: ProvisionResult = run(None)
        return result
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=render.out,
                  transient=False) as progress:
        view = _ProgressView(progress)
        result = run(view)
    return result


class _ProgressView:
    """One progress line per zone attempt."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks: dict[int, TaskID] = {}

    def __call__(self, event: Event) -> None:
        from geosched.console import render
        c = event.candidate
        label = f"#{event.seq} {c.label}" if c is not None else ""
        if event.kind == "plan":
            self.progress.console.print(f"plan: {event.message}")
        elif event.kind == "skip":
            self.progress.console.print(f"[dim]{render.safe(label)}: skipped: {render.safe(plain(event.message))}[/]",
                                        markup=True)
        elif event.kind == "start" and event.seq is not None:
            self.tasks[event.seq] = self.progress.add_task(f"{render.safe(label)}: launching", total=1)
        elif event.seq in self.tasks:
            task = self.tasks[event.seq]
            done = event.kind in ("launched", "failed", "cancelled")
            text = {"launched": "[green]launched[/]", "failed": "[red]failed[/]", "cancelled": "cancelled",
                    "retry": "[yellow]retrying[/]"}.get(event.kind, event.kind)
            message = render.safe(plain(event.message))
            self.progress.update(task, description=f"{render.safe(label)}: {text}: {message}",
                                 completed=1 if done else 0)


def _subnet(plan: Plan, c: Candidate) -> str | None:
    """The subnet a candidate launches into: the AWS subnet id, or the GCP subnetwork's name (its self link
    is too long for a table; the JSON has it whole)."""
    if plan.coverage is None:
        return None
    subnet = plan.coverage.subnet(c.provider, c.zone)
    return subnet.rsplit("/", 1)[-1] if subnet else None


def _plan_rows(plan: Plan, limit: int | None) -> list[dict[str, Any]]:
    rows = []
    for i, c in enumerate(plan.candidates[:limit] if limit else plan.candidates, start=1):
        row: dict[str, Any] = {"rank": i, "provider": c.provider, "region": c.region, "zone": c.zone}
        if plan.coverage is not None:
            row["subnet"] = _subnet(plan, c) or "(default)"
        row.update({"instance_type": c.instance_type, "market": c.pricing.value, "usd_per_hour": c.usd_per_hour})
        if _has_spot(plan):
            row.update({"spot_risk": _risk_text(c, plan.request.nodes),
                        "adjusted_usd_per_hour": c.adjusted_usd_per_hour})
        row.update({"kgco2e_per_hour": c.gco2e_per_hour / 1000 if c.gco2e_per_hour is not None else None,
                    "score": c.score})
        rows.append(row)
    return rows


def _has_spot(plan: Plan) -> bool:
    return any(c.risk is not None for c in plan.candidates)


def _risk_text(c: Candidate, nodes: int) -> str | None:
    from geosched.console import catalog_view
    return None if c.risk is None else catalog_view.risk_text(c.risk, nodes)


def _offer(c: Candidate, plan: Plan | None = None) -> Offer:
    """A candidate as the plan and the result print it; `plan` made with a Terraform network: with its subnet."""
    from geosched.console.output import rfc3339
    from geosched.files.decl.provisioning import CoveredOffer, Offer, SpotRisk
    offer = {
        "provider": c.provider, "region": c.region, "zone": c.zone, "instance_type": c.instance_type, "gpu": c.gpu,
        "gpus_per_node": c.gpus, "pricing": c.pricing.value, "usd_per_hour": c.usd_per_hour,
        "gco2e_per_hour": c.gco2e_per_hour, "score": c.score}
    if c.risk is not None:
        offer["adjusted_usd_per_hour"] = c.adjusted_usd_per_hour
        offer["risk"] = SpotRisk.build(
            source=c.risk.source, detail=c.risk.detail, known=c.risk.known, hazard_per_node_hour=c.risk.hazard_per_hour,
            observed_at=rfc3339(c.risk.observed_at),
            age_s=None if c.risk.observed_at is None else round(time.time() - c.risk.observed_at, 1))
    if plan is not None and plan.coverage is not None:
        return CoveredOffer.build(**offer, subnet=plan.coverage.subnet(c.provider, c.zone))
    return Offer.build(**offer)


def _ondemand(plan: Plan, settings: ProviderSettings, owner: str) -> list[tuple[OnDemandNetwork, str]]:
    """Without a Terraform network: what the first launch per cloud makes sure exists (security group per AWS
    region, firewall rules per GCP project), and the line that says so. Said without any API call, so it cannot
    tell whether they exist already; they are created only when missing."""
    from geosched.providers import launchsettings
    if settings.network is not None:
        return []
    # Each cloud's own (geosched.providers.launchsettings), in its order there.
    out = []
    for name, entry in launchsettings.registry().items():
        regions = sorted({c.region for c in plan.candidates if c.provider == name})
        if regions:
            out.append(entry.ondemand(settings.of_cloud(name, entry.type), owner, regions))
    return out


def _show_plan(plan: Plan, output: Output, dry_run: bool, limit: int | None = PLAN_ROWS,
               ondemand: Sequence[tuple[OnDemandNetwork, str]] = (), no_headers: bool = False) -> None:
    from geosched.console.output import emit_document
    from geosched.files.decl.provisioning import ProvisionPlanDoc, Skipped
    skipped = [Skipped.build(**_offer(s.candidate).__dict__, reason=s.reason) for s in plan.skipped]
    doc = ProvisionPlanDoc.build(plan=[_offer(c, plan) for c in plan.candidates], skipped=skipped,
                                 network=[network for network, _ in ondemand] or None)
    emit_document(doc, output, lambda: _plan_table(plan, output, dry_run, limit, ondemand), no_headers=no_headers)


def _plan_table(plan: Plan, output: Output, dry_run: bool, limit: int | None,
                ondemand: Sequence[tuple[OnDemandNetwork, str]]) -> None:
    from geosched.console import render
    rows = _plan_rows(plan, None if output is Output.WIDE else limit)
    more = len(plan.candidates) - len(rows)
    caption = (f"... and {more} more" if more > 0 else "") + (" (dry run: no launch API was called)" if dry_run
                                                             else "")
    req = plan.request
    render.table(f"plan for {req.nodes} x {req.gpu}:{req.gpus_per_node} ({req.pricing.value})", rows,
                 caption=caption.strip() or None)
    if plan.skipped:
        rows_skipped = [{"provider": s.candidate.provider, "zone": s.candidate.zone,
                         "instance_type": s.candidate.instance_type, "market": s.candidate.pricing.value,
                         "reason": plain(s.reason)} for s in plan.skipped[:PLAN_ROWS]]
        more_skipped = len(plan.skipped) - len(rows_skipped)
        render.table("skipped", rows_skipped, caption=f"... and {more_skipped} more" if more_skipped > 0 else None)
    for line in _risk_notes(plan):
        render.out.print(line, markup=False)
    for network, detail in ondemand:
        regions = f" ({', '.join(network.regions)})" if network.regions else ""
        render.out.print(f"network: {network.provider}{regions}: {detail}", markup=False)


def _risk_notes(plan: Plan) -> list[str]:
    """What the spot risk column rests on, and where it rests on nothing (never silently zero)."""
    spot = [(c.provider, c.risk) for c in plan.candidates if c.risk is not None]
    if not spot:
        return []
    req = plan.request
    lines = [f"spot risk: $/h x (1 + {req.weights.spot_risk:g} x P(gang interrupted per hour) x "
             f"{req.rework.hours:g} h rework: half of {req.rework.checkpoint_interval_h * 60:g} min between "
             f"checkpoints + {req.rework.restart_h * 60:g} min restart); --risk-weight 0 ranks by price alone"]
    unknown = sorted({provider for provider, risk in spot if not risk.known})
    if unknown:
        lines.append(f"spot risk unknown for {', '.join(unknown)} (no stored signal): priced at the worst "
                     "placement score; `geosched catalog refresh` reads the signals")
    return lines


def attempt_rows(attempts: Sequence[journal.AttemptRecord]) -> list[dict[str, Any]]:
    """The attempt report: what was tried, in which order, and why each failed (also the demo's), as the
    ProvisionResult and GangStatus documents hold it."""
    return [a.row() for a in attempt_docs(attempts)]


def attempt_docs(attempts: Sequence[journal.AttemptRecord]) -> list[Attempt]:
    """The attempts as declared; the provider's message whole (up to MESSAGE_CHARS): a table wraps it, it is not cut
    to a progress line's length."""
    from geosched.files.decl.provisioning import Attempt
    return [Attempt.build(seq=a.seq, provider=a.provider, zone=a.zone, instance_type=a.instance_type,
                          market=a.pricing.value, outcome=a.outcome, error=a.error_kind, code=a.error_code,
                          api_calls=a.api_calls, retries=a.retries,
                          seconds=round((a.finished_at or a.started_at) - a.started_at, 2),
                          why=plain(a.message or "", MESSAGE_CHARS)) for a in attempts]


def attempts_table(title: str, rows: Sequence[dict[str, Any]], wide: bool = False) -> None:
    """`attempt_rows` for people: the essential columns (`kinds.ATTEMPTS`), all of them with `wide`."""
    from geosched.console import lists as kinds
    from geosched.console import output as contract
    contract.columns_table(title, kinds.ATTEMPTS, rows, wide=wide)


def _show_result(result: ProvisionResult, output: Output, no_headers: bool = False) -> None:
    from geosched.console import render
    from geosched.console.output import emit_document
    from geosched.core.errors import EXIT_NO_FIT
    def table() -> None:
        attempts_table(f"attempts for {result.gang}", attempt_rows(result.attempts), output is Output.WIDE)
        render.table("nodes", [{"name": n.name, "zone": n.zone, "instance_type": n.instance_type,
                                "provider_id": n.provider_id, "addresses": list(n.addresses)}
                               for n in result.nodes])
        render.out.print(f"{result.gang}: {result.state}: {plain(result.message)} ({result.api_calls} API calls, "
                         f"{result.elapsed_s:.1f} s)")

    from geosched.files.decl.provisioning import LaunchedNode, ProvisionResultDoc
    doc = ProvisionResultDoc.build(
        gang=result.gang, state=result.state, message=result.message, api_calls=result.api_calls,
        elapsed_s=round(result.elapsed_s, 3), chosen=_offer(result.candidate) if result.candidate else None,
        nodes=[LaunchedNode.build(name=n.name, zone=n.zone, provider_id=n.provider_id, addresses=list(n.addresses))
               for n in result.nodes],
        attempts=attempt_docs(result.attempts))
    emit_document(doc, output, table, no_headers=no_headers)
    if not result.ok:
        raise typer.Exit(EXIT_NO_FIT)


# --- down, status, sweep, check ----------------------------------------------------------------------

def _lifecycle_providers(ctx: typer.Context, store: Store, gangs: list[str], inventory: Path | None
                         ) -> dict[str, Provider]:
    from geosched.providers import journal
    from geosched.providers.ssh import SshProvider
    names = {r.provider for g in gangs for r in journal.instances(store, gang=g)}
    names |= {a.provider for g in gangs for a in journal.attempts(store, g) if a.outcome != "skipped"}
    providers = registry.build(sorted(n for n in names if n in registry.names()), provider_settings(ctx, inventory))
    ssh = providers.get("ssh")
    kept = store.inventories()
    # The store kept the inventory the gang was leased from: no need to pass the file again.
    if isinstance(ssh, SshProvider) and ssh.declared_inventory() is None and len(kept) == 1:
        providers["ssh"] = SshProvider(ssh.settings, kept[0])
    return providers


@app.command(name="down")
def down_cmd(
    ctx: typer.Context,
    gang: Annotated[str | None, typer.Argument(help="Gang to take down.")] = None,
    all_gangs: Annotated[bool, typer.Option("--all", help="Every gang the store has not seen terminated.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    inventory: Annotated[Path | None, typer.Option(help="Inventory file for the ssh provider.")] = None,
    output: OutputOpt = Output.TABLE,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Terminate every machine of a gang, including what a crashed or stalled launch left behind; for a node group
    gang, delete the node groups geosched created (by journal and tags) and nothing else; for a gang `up
    --provisioning-class` queued, delete its job (and request) and wait until the autoscaler's nodes are gone.

    A gang a live `up`, `provision` or `down` is still changing is left as it is, said in one line naming that
    command's pid (exit 1): run this again once it ended.

    Each call and each instance or node group deleted is logged to HOME/logs/down-GANG-TIME.log."""
    from geosched.console import lists as kinds
    from geosched.console import render
    from geosched.console.output import emit_list
    from geosched.core.errors import InputError
    from geosched.providers import journal, lease
    from geosched.store.db import Store
    if (gang is None) == (not all_gangs):
        raise InputError("GANG/--all", "", "name one gang or pass --all")
    if gang is not None:
        # A gang the store does not know is the user's mistake (exit 2), said even where the store cannot be
        # written (a read-only mount): looked up by a reader before the read-write open the teardown needs.
        with Store(state_home(ctx), reader=True) as store:
            if journal.gang_record(store, gang) is None:
                raise InputError("GANG", "", f"no gang {gang!r} in {store.path}")
    with Store(state_home(ctx)) as store:
        if all_gangs:
            targets = [g.gang for g in journal.gangs(store, journal.LIVE_GANG_STATES)]
        else:
            assert gang is not None
            if journal.gang_record(store, gang) is None:
                raise InputError("GANG", "", f"no gang {gang!r} in {store.path}")
            targets = [gang]
        if not targets:
            if output.tabular:
                render.out.print("nothing to take down")
            else:
                emit_list(kinds.GANG_DOWN, [], output)
            return
        if not yes:
            typer.confirm(f"Terminate every machine and node group of {', '.join(targets)}?", abort=True)
        rows = []
        with _provision_log(ctx, gang or "all", False, output, verb="down"):
            providers = _lifecycle_providers(ctx, store, targets, inventory)
            for target in targets:
                # A gang `up` (or another `down`) is changing is not taken down under it: one line naming that
                # command's pid, the gang left as it is (providers/lease.py); --all goes on with the others.
                try:
                    with lease.held(store, target, "down"):
                        rows.append(_down_one(store, target, providers))
                except lease.GangBusy as exc:
                    if not all_gangs:
                        raise
                    record = journal.gang_record(store, target)
                    rows.append({"gang": target, "state": record.state if record else "unknown", "terminated": 0,
                                 "api_calls": 0, "errors": [plain(str(exc))]})
    emit_list(kinds.GANG_DOWN, rows, output, no_headers=no_headers)
    if any(r["state"] != "terminated" for r in rows):
        raise typer.Exit(1)


def _down_one(store: Store, target: str, providers: Any) -> dict[str, Any]:
    """`down` of one gang, its lease held: the row `down` shows for it."""
    from geosched.console import render
    from geosched.providers import lifecycle, provreqs
    from geosched.providers.nodegroups import journal as nodegroup_journal

    if provreqs.is_request_gang(store, target):
        # Queued through a ProvisioningRequest (`up --provisioning-class`): the job is deleted and the nodes the
        # autoscaler made for it are charged until seen gone. Imported here: the kube client.
        from geosched.providers import provreqdown

        taken = provreqdown.take_down(store, target)
        for line in taken.queue:
            render.err.print(f"{target}: {line}", markup=False, highlight=False, soft_wrap=True)
        return {"gang": target, "state": taken.state, "terminated": taken.closed, "api_calls": 0,
                "errors": [plain(e) for e in taken.errors]}
    if nodegroup_journal.is_nodegroup_gang(store, target):
        # A node group gang: its groups are deleted (`terminated` counts groups). Imported here: the EKS client
        # needs boto3, which `geosched -h` must not load (tests/test_cli_startup.py).
        from geosched.providers.nodegroups import launch as nodegroup_launch

        groups = nodegroup_launch.down(store, target)
        for line in groups.blocks:
            render.err.print(f"{target}: {line}", markup=False, highlight=False, soft_wrap=True)
        return {"gang": target, "state": groups.state, "terminated": groups.deleted, "api_calls": groups.api_calls,
                "errors": [plain(e) for e in groups.errors]}
    result = lifecycle.down(store, providers, target)
    return {"gang": target, "state": result.state, "terminated": result.terminated, "api_calls": result.api_calls,
            "errors": [plain(e) for e in result.errors]}


@app.command(name="status")
def status_cmd(
    ctx: typer.Context,
    gang: Annotated[str | None, typer.Argument(help="Show one gang's attempts and machines.")] = None,
    output: OutputOpt = Output.TABLE,
    no_headers: NoHeadersOpt = False,
    refresh_first: Annotated[bool, typer.Option("--refresh", help="Read the providers first: machines preempted or "
                                                "deleted behind geosched's back are marked and stop being billed "
                                                "at the time the provider reports; nothing is terminated.")] = False,
    watch: Annotated[float | None, typer.Option("--watch", min=5.0, metavar="SECONDS", help="Refresh and show "
                                                "again every SECONDS until interrupted.")] = None,
    inventory: Annotated[Path | None, typer.Option(help="Inventory file for the ssh provider (default: the one "
                                                   "the store kept).")] = None,
) -> None:
    """Gangs in the store: state, zone, nodes up, $/h. Without --refresh/--watch no API call is made."""
    while True:
        failed = False
        if refresh_first or watch is not None:
            failed = _refresh(ctx, gang, inventory, output)
        _show_status(ctx, gang, output, no_headers)
        if watch is None:
            break
        time.sleep(watch)
    if failed:
        # A provider could not be read: what is shown may be stale (exit 1, as `sweep`).
        raise typer.Exit(1)


def _refresh(ctx: typer.Context, gang: str | None, inventory: Path | None, output: Output) -> bool:
    """Refresh the live gangs (or one); say what changed and what to do. True when a provider could not be read."""
    from geosched.console import render
    from geosched.providers import journal, lifecycle
    from geosched.store.db import Store
    with Store(state_home(ctx)) as store:
        gangs = [gang] if gang else [g.gang for g in journal.gangs(store, journal.LIVE_GANG_STATES)]
        providers = _lifecycle_providers(ctx, store, gangs, inventory)
        health = lifecycle.refresh(store, providers, gangs)
    for h in health:
        for err in h.errors:
            render.err.print(f"{h.gang}: {err}", markup=False, highlight=False, soft_wrap=True)
        if output.tabular and h.lost:
            render.out.print(f"{h.gang}: gone since the last look: {', '.join(h.lost)}", markup=False,
                             highlight=False, soft_wrap=True)
        if h.advice:
            render.err.print(f"{h.gang}: {h.advice}", markup=False, highlight=False, soft_wrap=True)
    return any(h.errors for h in health)


def _show_status(ctx: typer.Context, gang: str | None, output: Output, no_headers: bool) -> None:
    from geosched.console import lists as kinds
    from geosched.console import render
    from geosched.console.output import emit_document, emit_list, rfc3339
    from geosched.core.errors import InputError
    from geosched.files.decl.provisioning import CapacityBlock as BlockDoc
    from geosched.files.decl.provisioning import GangStatusDoc, Instance, NodeGroup
    from geosched.providers import journal
    from geosched.providers.nodegroups import blocks
    from geosched.providers.nodegroups import journal as nodegroup_journal
    from geosched.store.db import Store
    with Store(state_home(ctx), reader=True) as store:
        if gang is not None:
            record = journal.gang_record(store, gang)
            if record is None:
                raise InputError("GANG", "", f"no gang {gang!r} in {store.path}")
            doc = GangStatusDoc.build(
                gang=gang, state=_gang_state(store, record), message=record.message,
                attempts=attempt_docs(journal.attempts(store, gang)),
                instances=[Instance.build(name=r.name, provider=r.provider, zone=r.zone, provider_id=r.provider_id,
                                          state=r.state, note=plain(r.note or "") or None)
                           for r in journal.instances(store, gang=gang)],
                nodegroups=[NodeGroup.build(name=g.name, cluster=g.cluster, zone=g.zone, subnet=g.subnet,
                                            instance_type=g.instance_type, capacity_type=g.capacity_type,
                                            nodes=g.nodes, state=g.state, note=plain(g.note or "") or None)
                            for g in nodegroup_journal.groups(store, gang=gang)] or None,
                capacity_blocks=[BlockDoc.build(reservation=b.reservation, offering=b.offering, zone=b.zone,
                                                     instance_type=b.instance_type, nodes=b.nodes, state=b.state,
                                                     start=rfc3339(b.start_at), end=rfc3339(b.end_at),
                                                     upfront_usd=b.upfront_usd, note=blocks.describe(b))
                                 for b in blocks.of_gang(store, gang)] or None)
            attempts = [a.row() for a in doc.attempts]
            machines = [m.row() for m in doc.instances]
            groups = [g.row() for g in doc.nodegroups or ()]
            capacity_blocks = [b.row() for b in doc.capacity_blocks or ()]

            def table() -> None:
                render.out.print(f"{gang}: {doc.state}" + (f": {plain(record.message)}" if record.message
                                                           else ""))
                attempts_table("attempts", attempts, output is Output.WIDE)
                if groups:
                    render.table("node groups", groups)
                    for b in capacity_blocks:
                        render.out.print(str(b["note"]), markup=False, highlight=False, soft_wrap=True)
                else:
                    render.table("instances", machines)

            emit_document(doc, output, table, no_headers=no_headers)
            return
        rows = [_gang_row(store, g) for g in journal.gangs(store)]
        # A read-only store cannot be given an owner id; one with no id has launched nothing that carries it.
        owner = journal.existing_owner(store) if store.read_only else journal.owner(store)
    emit_list(kinds.GANGS, rows, output, no_headers=no_headers)
    if output.tabular and not no_headers and owner is not None:
        # The Terraform modules' `owner` variable must be this id (see terraform/README.md).
        render.out.print(f"owner id of this store: {owner}")


def _gang_state(store: Store, g: journal.GangRecord) -> str:
    """The gang's state for `status GANG`: the journal's, except a node group gang waiting at 0 nodes for its
    Capacity Block, which is `scheduled, starts at T` until the block's start."""
    from geosched.providers.nodegroups import journal as nodegroup_journal

    start = nodegroup_journal.scheduled_start(store, g.gang) if g.state == "ready" else None
    if start is None:
        return "creating" if _creating(store, g) else g.state
    return f"scheduled, starts at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(start))}"


def _creating(store: Store, g: journal.GangRecord) -> bool:
    """A ProvisioningRequest gang whose zone's objects are journalled as an intent, its request not Provisioned yet
    (its run watching it, or killed while it did): `status` says `creating`; `down` finds them in the cluster."""
    from geosched.providers import provreqs

    return g.state == "provisioning" and any(r.state == "intent" for r in provreqs.requests_of(store, g.gang))


def _gang_row(store: Store, g: journal.GangRecord) -> dict[str, Any]:
    from geosched.console.output import rfc3339
    from geosched.providers import journal, lifecycle, provreqs
    from geosched.providers.nodegroups import journal as nodegroup_journal
    rows = journal.instances(store, gang=g.gang)
    chosen = journal.attempt(store, g.attempt) if g.attempt else None
    billed = lifecycle.billed(store, g.gang)
    groups = nodegroup_journal.groups(store, gang=g.gang)
    if groups:
        # A node group gang: its nodes are the created groups' (EKS keeps them at the gang size), priced as planned.
        up = [r for r in groups if r.state == "created"]
        nodes_up = sum(r.nodes for r in up)
        usd = sum(a.usd_per_hour or 0.0 for a in journal.attempts(store, g.gang) if a.id in {r.attempt for r in up})
        open_rows = len([r for r in groups if r.state in ("intent", "deleting")])
    elif provreqs.is_request_gang(store, g.gang):
        # Queued through a ProvisioningRequest: its nodes are those the autoscaler made, charged until seen gone.
        charged = [n for r in provreqs.requests_of(store, g.gang) for n in provreqs.open_nodes(store, r)]
        nodes_up = len(charged)
        usd = (chosen.usd_per_hour or 0.0) * nodes_up / g.request.nodes if chosen and g.request else 0.0
        open_rows = len(provreqs.open_requests(store, g.gang))
    else:
        nodes_up, usd = len(billed), sum(r.usd_per_hour or 0.0 for r in billed)
        open_rows = len([r for r in rows if r.state in ("intent", "terminating")])
    # A ready gang that lost machines (as the last refresh saw) says so; one waiting for its Capacity Block too.
    scheduled = groups and nodegroup_journal.scheduled_start(store, g.gang) is not None
    state = ("scheduled" if g.state == "ready" and scheduled else "creating" if _creating(store, g) else
             "degraded" if g.state == "ready" and g.request and nodes_up < g.request.nodes else g.state)
    return {"gang": g.gang, "state": state,
            "provider": chosen.provider if chosen else None, "zone": chosen.zone if chosen else None,
            "instance_type": chosen.instance_type if chosen else None,
            "nodes_up": nodes_up, "nodes": g.request.nodes if g.request else None,
            "open": open_rows,
            "usd_per_hour": usd,
            "created_at": rfc3339(g.created_at),
            "age_h": round((time.time() - g.created_at) / 3600, 2)}


@app.command(name="sweep")
def sweep_cmd(
    ctx: typer.Context,
    provider: Annotated[list[str], typer.Option(help=f"Providers to look in (default: {PROVIDERS_TEXT}); with "
                                                "--cluster, the cluster's cloud: aws (EKS) or gcp (GKE).")] = [],  # noqa: B006
    regions: Annotated[list[str], typer.Option("--regions", "--region", help="Only these regions; with --cluster, "
                                               "the cluster's region (GKE: its location).")] = [],  # noqa: B006
    cluster: Annotated[list[str], typer.Option(help="Look for node groups (EKS) or node pools (GKE) geosched made "
                                               "in this cluster instead of machines (repeat for several; "
                                               "--provider and --region pair with them as for provision "
                                               "--cluster). Without it, the clusters this store has made groups "
                                               "in are swept beside the machines.")] = [],  # noqa: B006
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Terminate (delete) what is found without asking.")] = False,
    any_owner: Annotated[bool, typer.Option("--any-owner", help="Also what another store launched.")] = False,
    inventory: Annotated[Path | None, typer.Option(help="Inventory file for the ssh provider.")] = None,
    output: OutputOpt = Output.TABLE,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Find instances, node groups and node pools tagged by geosched that the store has no open record of, and
    offer to terminate (delete) them."""
    from geosched.console import lists as kinds
    from geosched.console import render
    from geosched.console.output import emit_list
    from geosched.providers import lifecycle
    from geosched.providers.nodegroups import launch as nodegroup_launch
    from geosched.providers.nodegroups import sweep as group_sweep
    from geosched.store.db import Store
    names = split_names(provider) or DEFAULT_PROVIDERS
    wanted = split_names(regions)
    places, backend_for = (_sweep_places(cluster, split_names(provider), wanted) if cluster
                           else ((), nodegroup_launch.open_backend))
    # With --cluster only the clusters are looked in: --provider and --region then say where they are.
    providers = {} if cluster else registry.build(names, provider_settings(ctx, inventory))
    scope = {n: wanted for n in names} if wanted else None

    def look(store: Store, delete: bool) -> tuple[lifecycle.SweepResult, group_sweep.GroupSweep]:
        # Without --cluster, the journal's clusters within --provider and --region, as the machines are.
        where = places or tuple(p for p in group_sweep.known_places(store) if p.provider in names and (
            not wanted or p.location in wanted or group_sweep.region_of(p) in wanted))
        machines = lifecycle.sweep(store, providers, regions=scope, terminate=delete, any_owner=any_owner)
        return machines, group_sweep.sweep(store, where, backend_for, delete=delete, any_owner=any_owner,
                                           strict=bool(places))

    with Store(state_home(ctx)) as store:
        found, groups = look(store, False)
        rows = [{"kind": "instance", "provider": i.provider, "region": i.region, "zone": i.zone, "cluster": None,
                 "id": i.provider_id, "gang": i.gang, "owner": i.owner, "state": i.state.value}
                for i in found.orphans]
        rows += [{"kind": g.kind, "provider": g.place.provider, "region": g.place.location, "zone": None,
                  "cluster": g.place.cluster, "id": g.pool.name, "gang": g.gang, "owner": g.owner,
                  "state": g.pool.status.lower()} for g in groups.orphans]
        emit_list(kinds.ORPHANS, rows, output, no_headers=no_headers)
        if found.foreign or groups.foreign:
            render.err.print(f"{len(found.foreign) + len(groups.foreign)} tagged instance(s) or group(s) belong to "
                             "another store's owner (--any-owner includes them)")
        if found.reconciled:
            render.err.print(f"gangs with unrecorded instances (reconciled with --yes): {', '.join(found.reconciled)}")
        for error in found.errors + groups.errors:
            render.error(error)
        if not found.orphans and not found.reconciled and not groups.orphans:
            if found.errors or groups.errors:
                # Nothing found where it could not look is not "nothing there".
                raise typer.Exit(1)
            return
        if not yes and (not output.tabular or not _confirm(
                f"Terminate {len(found.orphans)} instance(s), delete {len(groups.orphans)} node group(s) or pool(s) "
                f"and reconcile {len(found.reconciled)} gang(s)?")):
            return
        done, deleted = look(store, True)
    render.err.print(f"terminated {done.terminated} instance(s); deleted {deleted.deleted} node group(s) or "
                     f"pool(s); reconciled {len(done.reconciled)} gang(s)")
    if done.errors or deleted.errors:
        raise typer.Exit(1)


def _sweep_places(clusters: Sequence[str], clouds: tuple[str, ...], regions: tuple[str, ...]
                  ) -> tuple[tuple[Place, ...], BackendFor]:
    """`sweep --cluster`: each named cluster as a `nodegroups.sweep.Place`, its name, cloud and location checked
    as `provision --cluster` checks them (before any call), and the backends so built for the sweep to use."""
    from geosched.core.errors import InputError
    from geosched.providers.nodegroups import launch as nodegroup_launch
    from geosched.providers.nodegroups.sweep import Place

    paired = list(zip(clusters, _paired("--provider", clouds, len(clusters)),
                      _paired("--region", regions, len(clusters)), strict=True))
    built: dict[tuple[str, str], Backend] = {}
    places = []
    for name, cloud, where in paired:
        b, _ = _cluster_backend(name, cloud, where, None, dry_run=True)
        built.setdefault((b.provider, b.region), b)
        places.append(Place(b.provider, b.region, name))
    if len(set(places)) < len(places):
        raise InputError("--cluster", "", "names the same cluster twice")

    def backend_for(cloud: str, location: str) -> Backend:
        return built.get((cloud, location)) or nodegroup_launch.open_backend(cloud, location)

    return tuple(places), backend_for


def _network_rows(provider: str, net: NetworkConfig | None, owner: str,
                  settings: ProviderSettings) -> list[dict[str, Any]]:
    """Per cloud: is a Terraform network loaded, which regions (and zones) it covers, and does its owner
    agree with this store's (else every launch is refused before the first call)."""
    from geosched import clouds
    from geosched.core.errors import InputError
    from geosched.providers import launchsettings
    from geosched.providers.config import ADMIN_CIDRS_HOWTO, exposure, is_world, wide_admin_cidrs
    from geosched.providers.terraform import check_owner
    launch = launchsettings.registry()[provider]
    if net is None:
        cidrs = settings.admin_cidrs
        # Not configured, or open to the world: a warning (provision refuses the first, the second was chosen).
        if not cidrs:
            ok, ssh = "warn", f"no admin CIDR set: provision refuses; {ADMIN_CIDRS_HOWTO}"
        elif any(is_world(c) for c in cidrs):
            ok, ssh = "warn", (f"SSH (tcp 22) open to the world: {', '.join(cidrs)} ({settings.admin_cidrs_from}); "
                               "key-only login, but narrow it if you can")
        elif wide := wide_admin_cidrs(cidrs):
            ok, ssh = "warn", (f"SSH (tcp 22) open to {', '.join(map(exposure, wide))} ({settings.admin_cidrs_from}); "
                               "key-only login, but narrow it if you can")
        else:
            ok, ssh = "yes", f"SSH (tcp 22) from {', '.join(cidrs)} ({settings.admin_cidrs_from})"
        return [{"provider": provider, "item": "network", "ok": "yes",
                 "detail": "no Terraform output loaded (--tf-output or GEOSCHED_TERRAFORM_OUTPUT): launches use the "
                 f"default {launch.default_network} with " + launch.ondemand_summary(owner, cidrs)},
                {"provider": provider, "item": "admin ssh", "ok": ok, "detail": unmarked(ssh)}]
    regions = net.regions(provider)
    if not regions:
        spec = clouds.get(provider)
        module = spec.terraform_module if spec is not None else None
        hint = f" (geosched's Terraform module for it: {module})" if module else ""
        return [{"provider": provider, "item": "network", "ok": "no",
                 "detail": plain(f"{net.source} covers no {provider} region: no {provider} zone can be used{hint}")}]
    covered = "; ".join(f"{name} ({', '.join(r.zones)})" for name, r in regions.items())
    rows = [{"provider": provider, "item": "network", "ok": "yes", "detail": unmarked(f"{net.source}: {covered}")}]
    problems: list[str] = []
    try:
        check_owner(net, owner, (provider,))
        launch.check_network(net, settings.of_cloud(provider, launch.type))
    except InputError as exc:
        problems.append(f"{exc.field}: {exc.reason}")
    rows.append({"provider": provider, "item": "network owner", "ok": "no" if problems else "yes",
                 "detail": unmarked("; ".join(problems)) if problems else f"{owner} (this store's owner id)"})
    return rows


def _confirm(question: str) -> bool:
    try:
        return bool(typer.confirm(question, default=False))
    except typer.Abort:  # end of input (no terminal): no
        return False


@app.command(name="check")
def check_cmd(
    ctx: typer.Context,
    provider: Annotated[list[str], typer.Option(help=f"Providers to check (default: {PROVIDERS_TEXT}, and "
                                                "ssh with --inventory).")] = [],  # noqa: B006
    inventory: Annotated[Path | None, typer.Option(help="Inventory file for the ssh provider.")] = None,
    tf_output: TfOutputOption = None,
    old_network: OldNetworkOption = None,
    admin_cidr: AdminCidrOption = [],  # noqa: B006
    output: OutputOpt = Output.TABLE,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Verify credentials and settings per provider and say what is missing (no secret is printed); exit 1 if
    anything is, warnings (`warn`) do not fail."""
    from geosched.console import lists as kinds
    from geosched.console.options import one_of
    from geosched.console.output import emit_list
    from geosched.core.extras import extra_for
    from geosched.providers import journal
    from geosched.store.db import Store
    names = split_names(provider) or (DEFAULT_PROVIDERS + (("ssh",) if inventory else ()))
    settings = provider_settings(ctx, inventory, network=one_of("--tf-output", tf_output, "--network", old_network),
                         admin_cidr=admin_cidr)
    unknown = [n for n in names if n not in registry.names()]
    if unknown:
        registry.build(unknown, settings)  # raises the one-line InputError naming the known providers
    with Store(state_home(ctx)) as store:
        owner = journal.owner(store)
    rows = []
    for name in names:
        try:
            items = registry.build((name,), settings)[name].check()
        except ModuleNotFoundError as exc:
            # The SDK's extra is not installed (a light install): a failed check that says what to install.
            missing = extra_for(exc)
            if missing is None:
                raise
            rows.append({"provider": name, "item": "sdk", "ok": "no", "detail": str(missing)})
            continue
        except Exception as exc:  # a provider whose SDK cannot even start is a failed check, not a crash
            rows.append({"provider": name, "item": "sdk", "ok": "no", "detail": f"{type(exc).__name__}"})
            continue
        rows.extend({"provider": i.provider, "item": i.item, "ok": "yes" if i.ok else "no",
                     "detail": plain(i.detail)} for i in items)
        if name in registry.CLOUDS:
            rows.extend(_network_rows(name, settings.network, owner, settings))
    rows.append({"provider": "all", "item": "ssh public key", "ok": "yes" if settings.ssh_public_key else "no",
                 "detail": "found" if settings.ssh_public_key else "none: pass --ssh-key or set "
                 "GEOSCHED_SSH_PUBLIC_KEY (nodes will not accept your logins)"})
    # `ok` a boolean for programs (a warning does not fail), `status` the word people read (yes, no, warn).
    emit_list(kinds.CHECKS, [{"provider": r["provider"], "item": r["item"], "status": r["ok"], "ok": r["ok"] != "no",
                              "detail": r["detail"]} for r in rows], output, no_headers=no_headers)
    if any(r["ok"] == "no" for r in rows):
        raise typer.Exit(1)


# --- catalog refresh (attached by the root CLI to its `catalog` group) -------------------------------

def catalog_refresh(
    ctx: typer.Context,
    provider: Annotated[str, typer.Option(help=f"{either(registry.CLOUDS)}.")],
    regions: Annotated[list[str], typer.Option("--regions", "--region", help="Only these regions.")] = [],  # noqa: B006
) -> None:
    """Refresh offerings and prices from a provider's API into the store (the shipped catalog stays the
    offline default)."""
    from geosched.console import render
    from geosched.core.errors import CredentialsError, InputError
    from geosched.providers.base import AuthError
    from geosched.providers.refresh import refresh_catalog
    from geosched.store.db import Store
    if provider not in registry.CLOUDS:
        raise InputError("--provider", "", f"expected one of {', '.join(registry.CLOUDS)}, got {provider!r}")
    built = registry.build((provider,), provider_settings(ctx))
    with Store(state_home(ctx)) as store:
        try:
            result = refresh_catalog(built[provider], store, regions=split_names(regions))
        except AuthError as exc:
            # Missing or refused credentials are exit 4 (docs/exit-codes.md), said once.
            raise CredentialsError(f"no credentials for {provider} ({exc.message}): run `geosched check`") from None
    signals = f", {result.signals} spot risk signals" if result.signals else ""
    render.out.print(f"{provider}: {result.offerings} offerings and {result.prices} prices{signals} from "
                     f"{len(result.regions)} region(s) in {result.api_calls} API calls")
    for line in result.dropped:
        render.warning(f"dropped {line}")
    for error in result.errors:
        render.error(error)


__all__ = ["app", "catalog_refresh"]
