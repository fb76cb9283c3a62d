"""`geosched up JOB --cluster NAME`: a job from nothing to running on capacity made for it, in one command.

It composes the verbs that exist, it does not redo them:

1. `provision --cluster` (providers/cli.py `_provision_nodegroup`): the gang the job describes (its workers, GPU
   model and GPUs per worker, its pricing) becomes an EKS managed node group (`--provider aws`, the default) or a
   GKE node pool (`--provider gcp`, `--region` the cluster's location) in the zone the plan ranks first, failing
   over zone by zone; `--dry-run` stops here and shows that plan with its $/h. The cloud is named, not guessed:
   a kubeconfig context says nothing reliable about which cloud runs the cluster.
2. wait until the group's nodes are Ready in the cluster, their GPUs allocatable (kube/nodejoin.py), selected by
   the label the cloud puts on every node of the group: `eks.amazonaws.com/nodegroup=<group>` (EKS),
   `cloud.google.com/gke-nodepool=<pool>` (GKE). The wait is step 1's `join` (`_Joiner`): nodes not Ready by the
   deadline fail the zone over like a capacity refusal (the group deleted, the next zone or cluster tried);
3. `submit` (kube/submit.py) on that cluster's context only, its inventory restricted to those nodes
   (`SubmitOptions.node_labels`): the same placement decision as `place` and `submit`, on exactly the new nodes.

Run again with `--name GANG` for a gang this store has (the first `up` on a Capacity Block that starts later ends
`scheduled`), `up` picks the gang up (providers/nodegroups/resume.py), as `sky launch -c NAME` reuses the cluster
NAME: it checks the job asks for the gang's shape (GPU model, GPUs per worker, workers plus spares, market; another
is refused in one line), puts the group's scheduled actions again, waits until the block starts, then for the nodes,
and places the job as in 3. It creates and buys nothing, so a failure deletes nothing either: `geosched down GANG`.

One command at a time: `up` holds the gang (providers/lease.py) until it ends, its rollback included; a `geosched
down GANG` meanwhile refuses in one line naming this pid and changes nothing, and an `up --name GANG` while `down`
runs refuses alike. A killed `up` holds nothing: the `down` after it goes ahead.

All or nothing: when no zone's nodes come up in time, a cluster cannot be asked, or the job cannot be placed or
applied on them, the group is deleted before the command exits (the same teardown as `geosched down GANG`), and the
error says so. After a success the group stays until `geosched down GANG`.

With `--probe`, between 2 and 3 the links between the group's nodes are measured with pods pinned to them
(kube/netprobe/: ping and iperf3, no SSH), stored as probe samples and handed to the placement.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from geosched import clouds, policies
from geosched.clouds.aws import NAME as EKS
from geosched.clouds.gcp import NAME as GKE
from geosched.console.options import (
    DEFAULT_WEIGHTS,
    CostWeightOpt,
    NetworkWeightOpt,
    ZoneToleranceOpt,
    finite,
    known_policy,
)
from geosched.console.output import NoHeadersOpt, Output, OutputOpt
from geosched.core.errors import GeoschedError
from geosched.kube import keys
from geosched.kube.kinds import help_names as job_kinds
from geosched.providers import cli as providers_cli
from geosched.providers import cliparts

if TYPE_CHECKING:
    from geosched.cli.provfailover import Zone
    from geosched.core.models import NetworkView, Weights
    from geosched.kube import provreq
    from geosched.kube.config import ClusterConfig
    from geosched.kube.jobinput import JobInput
    from geosched.kube.submit import SubmitOutcome
    from geosched.kube.tolerations import Toleration
    from geosched.providers.nodegroups.backend import Target
    from geosched.providers.nodegroups.launch import GroupResult, NewGroup
    from geosched.providers.plan import PricingMode

# The label EKS sets on every node of a managed node group (EKS User Guide, "Managed node groups": the nodes carry
# eks.amazonaws.com/nodegroup=<name> and eks.amazonaws.com/capacityType); tests/kubeapi/real_nodes.py shows it.
NODEGROUP_LABEL = keys.EKS_NODEGROUP
# GKE's on every node of a node pool (geosched/clouds/gcp.py, with its source).
NODEPOOL_LABEL = keys.GKE_NODEPOOL
# Per cloud: the label selecting the group's nodes (its spec's `pool_label`), and the GPU taint its nodes carry
# (EKS: the one geosched puts on the group, spec.GPU_TAINT; GKE: the one GKE puts on every GPU node itself,
# gkespec.GPU_TAINT).
GROUP_LABELS = {s.name: s.pool_label for s in clouds.all_specs() if s.pool_label is not None}


def group_taint(provider: str) -> Toleration:
    """The toleration of the GPU taint on `provider`'s group nodes. A function, not a table built at import: the node
    group specs load the providers' base, which `geosched -h` does not need (issue 25)."""
    from geosched.kube.tolerations import Toleration
    from geosched.providers.nodegroups.gkespec import GPU_TAINT as GKE_GPU_TAINT
    from geosched.providers.nodegroups.spec import GPU_TAINT

    taint = {EKS: GPU_TAINT, GKE: GKE_GPU_TAINT}[provider]
    return Toleration(taint["key"], "Equal", taint["value"], "NoSchedule")


class UpFailed(GeoschedError):
    """The capacity came up but the job did not get onto it (exit 1); what was created has been deleted."""


def up_cmd(
    ctx: typer.Context,
    job_file: Annotated[Path, typer.Argument(metavar="JOB", help=f"Job file: compact geosched Job or a {job_kinds()}; "
                                             "its workers, gpu and gpus per worker size the node group.")],
    cluster: Annotated[list[str], typer.Option(help="The EKS or GKE cluster to add the node group (pool) to. "
                                               "Repeat to fail over to the next cluster when every zone of one "
                                               "refuses; --provider, --region and --context then pair with the "
                                               "clusters in order (one value: for every cluster).")],
    # Not named `provider`: GEOSCHED_PROVIDERS (the machine path's list, settings.py) must not pair with clusters.
    cloud_names: Annotated[list[str], typer.Option("--provider", help="The cluster's cloud: aws (EKS, a managed node "
                                                   "group, the default) or gcp (GKE, a node pool).")] = [],  # noqa: B006
    context: Annotated[list[str], typer.Option(help="The kubeconfig context of that cluster (default: the "
                                               "cluster's name).")] = [],  # noqa: B006
    kubeconfig: Annotated[Path | None, typer.Option("--kubeconfig", help="Kubeconfig file (default: $KUBECONFIG, "
                                                    "else ~/.kube/config).")] = None,
    clusters: Annotated[Path | None, typer.Option("--clusters", help="Cluster config (ClusterConfig YAML): the "
                                                  "context's backend, namespace, queue.")] = None,
    region: Annotated[list[str], typer.Option(help="The cluster's region (default: the AWS configuration's); "
                                              "GKE: the cluster's location, required.")] = [],  # noqa: B006
    node_role: Annotated[str | None, typer.Option(help="The IAM role ARN the group's nodes run as (default: "
                                                  f"${providers_cli.ENV_NODE_ROLE}).")] = None,
    name: Annotated[str | None, typer.Option(help="Gang name (default: generated). The name of a node group gang "
                                             "this store made for the same job shape picks it up instead: creates "
                                             "and buys nothing, waits for its Capacity Block's start and its nodes, "
                                             "then places JOB (a scheduled gang's second `up`).")] = None,
    join_timeout: Annotated[float, typer.Option(callback=finite, min=1.0, help="Seconds the nodes may take to "
                                                "join and be Ready, their GPUs allocatable, once the group is "
                                                "ACTIVE.")] = 900.0,
    probe: Annotated[bool, typer.Option("--probe", help="Once the nodes are Ready, measure the network between them "
                                        "with pods pinned to each (ping, iperf3; no SSH) and place on the "
                                        "measurements. Needs deploy/netprobe/rbac.yaml's rights in the job's "
                                        "namespace.")] = False,
    probe_image: Annotated[str, typer.Option(help="With --probe: the image the probe pods run (sh, timeout, iputils "
                                             "ping and iperf3 on PATH).")] = "nicolaka/netshoot:v0.13",
    probe_timeout: Annotated[float, typer.Option(callback=finite, min=1.0, help="With --probe: seconds the whole "
                                                 "probe may take (image pulls included); then it places on what "
                                                 "was measured.")] = 300.0,
    policy: Annotated[str, typer.Option(help="Placement policy.", callback=known_policy)] = policies.DEFAULT_POLICY,
    network_weight: NetworkWeightOpt = DEFAULT_WEIGHTS.network,
    cost_weight: CostWeightOpt = DEFAULT_WEIGHTS.cost,
    zone_tolerance: ZoneToleranceOpt = DEFAULT_WEIGHTS.zone_tolerance,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the node group plan and its $/h; create "
                                          "nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    spare_nodes: Annotated[int, typer.Option(min=0, max=64, help="Make the node group this many nodes larger than "
                                             "the gang, so the placement (with --probe: on the measured links) "
                                             "chooses which of its nodes the gang runs on; the spares are charged "
                                             "like the rest.")] = 0,
    capacity_block: providers_cli.CapacityBlockOpt = None,
    buy_capacity_block: providers_cli.BuyCapacityBlockOpt = False,
    capacity_block_starts_within: providers_cli.BlockStartsWithinOpt = 1.0,
    wait_for_block: Annotated[bool, typer.Option(
        "--wait-for-block", help="With a Capacity Block that starts later: keep running until its start (the "
        "command sleeps; a day, often), then wait for the nodes (--join-timeout) and place the job as usual, "
        "instead of returning once the node group is scheduled.")] = False,
    karpenter: providers_cli.KarpenterOpt = False,
    out: providers_cli.KarpenterOutOpt = None,
    ami: providers_cli.AmiOpt = "al2023",
    expire_after: providers_cli.ExpireAfterOpt = providers_cli.DEFAULT_EXPIRE_AFTER,
    karpenter_zones: providers_cli.KarpenterZonesOpt = providers_cli.DEFAULT_KARPENTER_ZONES,
    output: OutputOpt = Output.TABLE,
    no_headers: NoHeadersOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print each cloud call to stderr.")] = False,
    provisioning_class: Annotated[str | None, typer.Option(
        "--provisioning-class", help="Create no node pool: queue JOB through Kueue's ProvisioningRequest admission "
        "check, pinned to the zone geosched chooses, and let the cluster's autoscaler bring the nodes up there "
        "(queued-provisioning.gke.io: GKE's Dynamic Workload Scheduler, --provider gcp; best-effort-atomic-scale-up."
        "autoscaling.x-k8s.io or check-capacity.autoscaling.x-k8s.io: cluster-autoscaler's, GKE or EKS). With "
        "--out, written for your GitOps instead of applied.")] = None,
    without_kueue: Annotated[bool, typer.Option(
        "--without-kueue", help="With --provisioning-class: render the ProvisioningRequest and its PodTemplates "
        "yourself, the job's pods annotated to consume it, for a cluster without Kueue (default: Kueue's admission "
        "check makes the request).")] = False,
    provisioning_timeout: Annotated[float, typer.Option(
        callback=finite, min=1.0, help="With --provisioning-class, applied: seconds each zone's ProvisioningRequest "
        "may take to be Provisioned; a request that fails, loses its capacity or runs out of time is withdrawn and "
        "the plan's next zone asked.")] = 3600.0,
) -> None:
    """Create an EKS managed node group or GKE node pool for JOB in the zone geosched chooses, wait until its nodes
    are Ready, and submit JOB onto exactly those nodes. `geosched down GANG` removes the group afterwards."""
    from geosched.console import render
    from geosched.core.errors import EXIT_NO_FIT, InputError
    from geosched.core.models import Pricing, Weights
    from geosched.kube.jobinput import read_job_file  # the job readers: only when the command runs
    from geosched.policies.spotrisk import Rework
    from geosched.providers.plan import PricingMode

    job_input = read_job_file(job_file)
    job = job_input.job
    if not job.gpu:
        raise InputError(str(job_file), "gpu", "`up` sizes a node group by the job's GPU model: name it (gpu:)")
    pricing = PricingMode.SPOT if job.pricing is Pricing.SPOT else PricingMode.ON_DEMAND
    contexts = dict(zip(cluster, providers_cli._paired("--context", tuple(context), len(cluster)), strict=True))
    if karpenter:
        # Karpenter's pool is rendered for one cluster's GitOps: no failover between clusters.
        if len(cluster) > 1 or len(cloud_names) > 1 or len(region) > 1:
            raise InputError("--cluster", "", "--karpenter takes one cluster (and one --provider, --region)")
        one, cloud, where = cluster[0], cloud_names[0] if cloud_names else EKS, region[0] if region else None
    if provisioning_class is not None and (out is not None or dry_run) and len(cluster) > 1:
        raise InputError("--cluster", "", "--provisioning-class with --out or --dry-run shows one cluster's objects: "
                         "name one (several fail over only when applied)")
    if spare_nodes and (provisioning_class is not None or karpenter):
        raise InputError("--spare-nodes", "", "sizes a managed node group geosched creates: not with --karpenter or "
                         "--provisioning-class")
    if wait_for_block and capacity_block is None:
        raise InputError("--wait-for-block", "", "waits for the start of the Capacity Block --capacity-block HOURS "
                         "buys: use it with that")
    if (capacity_block is not None or buy_capacity_block) and (provisioning_class is not None or karpenter):
        raise InputError("--capacity-block", "", "buys capacity for a managed node group geosched creates: not with "
                         "--karpenter or --provisioning-class")
    if provisioning_class is not None and karpenter:
        raise InputError("--karpenter", "", "and --provisioning-class both hand the nodes to someone else "
                         "(Karpenter on EKS, the autoscaler on GKE): choose one")
    if without_kueue and provisioning_class is None:
        raise InputError("--without-kueue", "", "renders a ProvisioningRequest: name its --provisioning-class")
    if out is not None and provisioning_class is None and not karpenter:
        raise InputError("--out", "", "writes what --karpenter or --provisioning-class renders; a node group is "
                         "created, not written")
    if provisioning_class is not None:
        _queue_provisioning(ctx, job_file, cluster, cloud_names, region, contexts, kubeconfig, clusters,
                            provisioning_class, pricing, dry_run, yes, output, no_headers, out=out,
                            without_kueue=without_kueue, gang=name, timeout_s=provisioning_timeout)
        return
    if karpenter:
        # The pool and the job pinned to it, rendered for GitOps: Karpenter, not geosched, brings the nodes.
        from geosched.providers.karpenter_cli import render_pool

        if clusters is not None and job_input.namespace is None:
            # The cluster config's namespace, as `up` and `submit` use it (the context's entry, else the cluster's).
            from geosched.kube.config import load_cluster_config

            configs = load_cluster_config(clusters)
            found = next((c for c in configs.values() if c.context == (contexts[one] or one)), configs.get(one))
            if found is not None and found.namespace is not None:
                job_input = replace(job_input, namespace=found.namespace)
        render_pool(ctx, one, node_role, f"{job.gpu}:{job.gpus_per_worker}", job.workers, pricing, [cloud],
                    [where] if where else [], Weights(network=0.0, cost=DEFAULT_WEIGHTS.cost,
                                                        carbon=DEFAULT_WEIGHTS.carbon,
                                                        spot_risk=DEFAULT_WEIGHTS.spot_risk),
                    Rework(1.0, 0.25), name, dry_run, output, no_headers, out, ami, expire_after, karpenter_zones,
                    job=job_input)
        return
    from geosched.providers.gang import check_gang_name, new_gang_name

    if name:
        check_gang_name(name)
    gang = name or new_gang_name()  # known before anything is created: a failure below tears it down by name
    if not dry_run:
        # Held until the command ends, its rollback included: a `down GANG` meanwhile refuses, naming this pid, and
        # changes nothing, rather than closing the gang while groups are still created (providers/lease.py).
        ctx.with_resource(_lease(ctx, gang))
    join = _Joiner(contexts, kubeconfig, join_timeout)
    if name and _journalled(ctx, name):
        # The gang exists: picked up, not made again (`sky launch -c NAME` on a cluster that exists does the same).
        kept = partial(_kept, name, join)
        try:
            resumed, cloud = _resume(ctx, name, job.gpu, job.gpus_per_worker, job.workers + spare_nodes, pricing,
                                     cluster, join, dry_run, output, verbose)
        except Exception as exc:
            raise kept(exc) from None
        if resumed is None or resumed.group is None:
            return
        _place(ctx, job_file, job_input, resumed.group, name, cloud, contexts.get(resumed.cluster) or resumed.cluster,
               join, kubeconfig, clusters, policy,
               Weights(network_weight, cost_weight, DEFAULT_WEIGHTS.carbon, zone_tolerance), probe, probe_image,
               probe_timeout, output, no_headers, kept, lambda: kept(UpFailed("interrupted")))
        return
    if not dry_run:
        _warn_without_plugin(cluster, contexts, kubeconfig)
    try:
        result = providers_cli._provision_nodegroup(
            ctx, cluster, node_role, f"{job.gpu}:{job.gpus_per_worker}", job.workers + spare_nodes, pricing,
            cloud_names, region, Weights(network=0.0, cost=DEFAULT_WEIGHTS.cost, carbon=DEFAULT_WEIGHTS.carbon,
                            spot_risk=DEFAULT_WEIGHTS.spot_risk),
            Rework(1.0, 0.25), gang, dry_run, yes, output, no_headers, verbose, show_result=False, join=join,
            capacity_block=capacity_block, buy_capacity_block=buy_capacity_block,
            starts_within_h=capacity_block_starts_within, until=sleep_until if wait_for_block else None)
    except KeyboardInterrupt:
        raise _interrupted(ctx, gang) from None
    except Exception as exc:
        # Waiting for the nodes could not ask a cluster (nodejoin's API errors, an unreachable server): the
        # attempt's group is deleted already (launch.py); `down` makes sure of the rest of the gang.
        raise _up_failed(ctx, gang, exc, join.context) from None
    if result is None:  # the dry run showed the plan
        return
    if result.attempts:
        _charge_to_job(ctx, result.gang, job.name)  # failed groups too: they were the job's capacity while they lived
    if not result.ok or result.group is None or result.target is None:
        render.error(result.message)
        raise typer.Exit(EXIT_NO_FIT)
    if result.state == "scheduled":
        # A Capacity Block that starts later: the group waits at 0 nodes and the cloud scales it at the start. `up`
        # does not block for a day: the same `up` with --name picks the gang up (`_resume`), or `submit` places the
        # job once the nodes are Ready.
        render.err.print(f"gang {result.gang}: {result.message}; {job.name} is not submitted: run `geosched submit "
                         f"{job_file} --context {contexts.get(result.cluster) or result.cluster}` once the nodes are "
                         f"Ready, or this `up` again with --name {result.gang} (it waits for the start, then places "
                         f"{job.name}); `geosched down {result.gang}` deletes the node group (the block stays paid)",
                         markup=False, highlight=False, soft_wrap=True)
        return
    # The cluster the gang landed in (several --cluster: the first whose zone held it), and its context and cloud.
    landed, cloud = result.cluster, result.target.candidate.provider
    kube_context = contexts.get(landed) or landed
    gang_made = result.gang

    def torn_down(exc: Exception) -> Exception:
        return _up_failed(ctx, gang_made, exc, kube_context)

    _place(ctx, job_file, job_input, result.group, result.gang, cloud, kube_context, join, kubeconfig, clusters,
           policy, Weights(network_weight, cost_weight, DEFAULT_WEIGHTS.carbon, zone_tolerance), probe, probe_image,
           probe_timeout, output, no_headers, torn_down, partial(_interrupted, ctx, gang_made))


def _place(ctx: typer.Context, job_file: Path, job_input: JobInput, group: str, gang: str, cloud: str,
           kube_context: str, join: _Joiner, kubeconfig: Path | None, clusters: Path | None, policy: str,
           weights: Weights, probe: bool, probe_image: str, probe_timeout: float, output: Output, no_headers: bool,
           failed: Callable[[Exception], Exception], interrupted: Callable[[], BaseException]) -> None:
    """Steps 3 and 4 on a group whose nodes are Ready: the optional probe, then `submit` onto the group's nodes;
    the outcome shown. `failed` turns an error into the command's and `interrupted` a Ctrl-C (a fresh `up` tears
    the group down, a re-run keeps it)."""
    from geosched.console import render

    job = job_input.job
    what = join.kinds.get(group, "node group")  # a picked-up gang's group was not joined here: EKS's word
    try:
        network = None
        if probe:
            network = _probe(ctx, group, join.ready.get(group, ()), kube_context, kubeconfig, clusters,
                             job_input.namespace, cloud, probe_image, probe_timeout, _say(output))
        outcome = _submit(job_file, group, kube_context, kubeconfig, clusters, policy, weights, cloud, network)
    except KeyboardInterrupt:
        raise interrupted() from None
    except Exception as exc:
        raise failed(exc) from None
    if outcome.status != "applied":
        nofit = outcome.nofit.message if outcome.nofit is not None else outcome.status
        raise failed(UpFailed(f"{job.name} was not placed on {what} {group}: {nofit}"))
    from geosched.console.output import emit_document
    from geosched.kube import cli as kube_cli

    emit_document(kube_cli.outcome_doc(outcome), output, lambda: kube_cli._print_outcome(outcome),
                  no_headers=no_headers)
    # On stderr in every format (stdout stays the SubmitOutcome): without it a JSON run would not learn the gang.
    render.err.print(f"gang {gang}: {what} {group} runs {job.name}; `geosched down {gang}` "
                     "deletes it", markup=False, highlight=False, soft_wrap=True)


def _kept(gang: str, join: _Joiner, exc: Exception) -> Exception:
    """The error a re-run (`_resume`) ends with: as `_up_failed`'s, but nothing is deleted: the group is an earlier
    command's, and may stand on a paid block. Anything else (a bug) unchanged."""
    from geosched.core.errors import InputError
    from geosched.kube import cli as kube_cli
    from geosched.kube.client import describe

    keep = f"gang {gang}'s node group stands: run `up` again, or `geosched down {gang}`"
    if isinstance(exc, InputError):
        return exc  # the re-run refused (another request's gang): nothing was asked of any cloud
    if isinstance(exc, GeoschedError):
        return UpFailed(f"{exc}; {keep}")
    if kube_cli._unreachable(exc):
        return UpFailed(f"cannot reach cluster {join.context}: {describe(exc)}; {keep}")
    return exc


def _resume(ctx: typer.Context, gang: str, gpu: str, gpus_per_node: int, nodes: int, pricing: PricingMode,
            cluster_names: Sequence[str], join: _Joiner, dry_run: bool, output: Output,
            verbose: bool) -> tuple[GroupResult | None, str]:
    """`up --name GANG` for a gang this store has (nodegroups/resume.py): refused in one line when it was made for
    another request; on a dry run, what the re-run would do (None returned); else its group once its nodes are
    Ready (the wait for a Capacity Block's start included), and its cloud. Creates and buys nothing."""
    from geosched.console import render
    from geosched.core.errors import EXIT_NO_FIT, InputError
    from geosched.providers import journal
    from geosched.providers.nodegroups import journal as groups_journal
    from geosched.providers.nodegroups import launch as nodegroup_launch
    from geosched.providers.nodegroups import resume as resuming
    from geosched.store.db import Store

    with Store(cliparts.state_home(ctx)) as store:
        record = journal.gang_record(store, gang)
        assert record is not None
        asked = resuming.Asked(gpu, gpus_per_node, nodes, pricing.value, tuple(cluster_names))
        why = resuming.problem(gang, record, groups_journal.groups(store, gang=gang), asked)
        if why is not None:
            raise InputError("--name", "", why)
        row = resuming.standing(store, gang)
        provider = next(a.provider for a in journal.attempts(store, gang) if a.id == row.attempt)
        starts = groups_journal.scheduled_start(store, gang)
        if dry_run:
            when = f"wait until its Capacity Block starts at {nodegroup_launch.utc(starts)}, then " if starts else ""
            render.err.print(f"gang {gang} exists: geosched would {when}wait for the {row.nodes} nodes of node group "
                             f"{row.name} in cluster {row.cluster} and place the job on them (nothing created)",
                             markup=False, highlight=False, soft_wrap=True)
            return None, provider
        backend = nodegroup_launch.open_backend(provider, row.region)
        with providers_cli._provision_log(ctx, gang, verbose, output, verb="up"):
            result = resuming.resume(store, gang, backend, join=join, until=sleep_until, notify=_say(output))
    if not result.ok:
        render.error(result.message)
        raise typer.Exit(EXIT_NO_FIT)
    return result, provider


# The first line of the file `up --provisioning-class --out` writes: what makes a file at --out geosched's to
# replace (`cliparts.check_rendered_out`), as --karpenter's file carries its own (providers/karpenter_cli.py). The
# same --out replaced whatever was there, the job file itself (`up train.yaml ... --out train.yaml`) or a
# hand-written manifest beside it in the GitOps tree (attack5). Neither marker is taken for the other's: the two
# commands render different objects for one path only by mistake.
PROVISIONING_WRITER = "geosched up --provisioning-class"
PROVISIONING_HEADER = (f"# Written by `{PROVISIONING_WRITER}`: the job pinned to the zone geosched chose, and what "
                       "asks the autoscaler for its nodes.\n")


def _gitops_queue(zone: Zone, kubeconfig: Path | None, out: Path) -> tuple[list[dict[str, Any]], str | None]:
    """What `up --provisioning-class --out` writes for `zone`, with the ClusterQueue as the
    cluster's own resolves it (kube/provreq.py `for_gitops`: a GitOps apply of the gang's own quota lowered an
    owner's raised one), and the line that says what became of it. The file is for GitOps and may be written where
    the cluster cannot be reached (no kubeconfig): then the rendered queue is written and the line says so. A file
    of ours at `out` that carries the queue keeps it (`cliparts.check_rendered_out` has made sure it is ours)."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    from geosched.cli import provfailover
    from geosched.core.errors import one_line
    from geosched.kube import provreq
    from geosched.kube.client import Kube

    objects = zone.render()
    queue = next(o for o in objects if o["kind"] == "ClusterQueue")
    name = str(queue["metadata"]["name"])
    try:
        with Kube.open(zone.context, kubeconfig, name=zone.cluster) as kube:
            live = provfailover._live(kube, queue)
    except (GeoschedError, ApiException, HTTPError, OSError) as exc:
        # GeoschedError lines are written to be shown; the others may quote headers or a body: named only.
        why = (one_line(str(exc)) if isinstance(exc, GeoschedError) else
               f"HTTP {exc.status}" if isinstance(exc, ApiException) else type(exc).__name__)
        return objects, (f"ClusterQueue {name} written with the gang's own quota: cluster {zone.cluster} not read "
                         f"({why}); where it has that queue already, with a larger quota, take the ClusterQueue out "
                         "of the file (a GitOps apply of it sets the quota to the gang's)")
    owned = _carries(out, "ClusterQueue", name)  # a file that is not YAML: its own line, exit 2
    try:
        written = provreq.for_gitops(objects, live, owned=owned)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        # The cluster's queue is the cluster's input, not ours: a quota the API server took but geosched cannot
        # read ("1e1000"), or a shape Kueue's schema would not give. One line, never a traceback.
        return objects, (f"ClusterQueue {name} written with the gang's own quota: cluster {zone.cluster}'s could "
                         f"not be read ({one_line(str(exc))[:120] or type(exc).__name__}); where it has that queue "
                         "with a larger quota, take the ClusterQueue out of the file")
    if live is None:
        return written, None
    if not any(o["kind"] == "ClusterQueue" for o in written):
        return written, (f"ClusterQueue {name} left out of the file: cluster {zone.cluster} has it, with quota for "
                         "the gang (its owner's to change)")
    return written, (f"ClusterQueue {name} written with cluster {zone.cluster}'s quotas, those below the gang's "
                     "raised to it (none lowered)")


def _carries(path: Path, kind: str, name: str) -> bool:
    """Whether the file at `path` (one `up --out` wrote, or none) holds an object of `kind` named `name`. Read
    through the gate (its size checked first); a file edited into something that is not YAML is one line, exit 2."""
    import yaml

    from geosched.core.errors import InputError, escape
    from geosched.files.gate import Kind, read_bytes

    if not path.exists():
        return False
    try:
        documents = list(yaml.safe_load_all(read_bytes(path, Kind.MANIFEST)))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        raise InputError("--out", "", f"{escape(str(path))} is not YAML{at}; move it away or fix it") from None
    return any(isinstance(d, dict) and d.get("kind") == kind and isinstance(d.get("metadata"), dict)
               and d["metadata"].get("name") == name for d in documents)


def _queue_provisioning(ctx: typer.Context, job_file: Path, cluster_names: list[str], providers: list[str],
                        regions: list[str], contexts: dict[str, str | None], kubeconfig: Path | None,
                        clusters: Path | None, class_name: str, pricing: PricingMode, dry_run: bool, yes: bool,
                        output: Output, no_headers: bool, *, out: Path | None = None, without_kueue: bool = False,
                        gang: str | None = None, timeout_s: float = 3600.0) -> None:
    """`up --provisioning-class`: the zones the node group (pool) plan ranks, the job pinned to the first and
    rendered beside Kueue's ProvisioningRequest admission check (kube/provreq.py `render`), or beside a
    ProvisioningRequest of its own (`--without-kueue`: `render_request`), applied to the cluster as `submit`
    applies, written to `out` for GitOps, or shown (--dry-run). The autoscaler then makes the nodes in that zone.
    Applied, the request is watched and a zone the autoscaler refuses is withdrawn for the next, the clusters
    (`--cluster` repeated) in the order the node group path tries them (cli/provfailover.py). Nothing is created
    in the cloud by geosched; applied, the nodes the autoscaler made for the gang are charged in the usage ledger
    until `geosched down GANG` has deleted the job (its Workload and, with it, the request Kueue owns; without Kueue
    the request and its PodTemplates too) and seen them gone (providers/provreqdown.py `take_down`). Written with --out,
    the file is your GitOps': a prune of it deletes them, and geosched charges nothing.

    GKE: the nodes are pinned by zone and `cloud.google.com/gke-accelerator`. EKS (cluster-autoscaler's classes
    only): by the zone's *name* in this account (what `topology.kubernetes.io/zone` holds on EKS nodes, read from
    the cluster's subnets as for a node group) and `node.kubernetes.io/instance-type`, labels the autoscaler knows
    of a node group before its nodes exist (its AWS provider builds a template node from the group's instance type
    and zone); GPU feature discovery's `nvidia.com/gpu.product` appears only once a node runs, too late for its
    scale-up simulation."""
    from geosched.console import render
    from geosched.console.output import emit_document
    from geosched.core.errors import EXIT_NO_FIT, InputError
    from geosched.core.models import Weights
    from geosched.kube import cli as kube_cli
    from geosched.kube import provreq
    from geosched.kube.config import load_cluster_config
    from geosched.kube.jobinput import read_job_file
    from geosched.kube.submit import SubmitOutcome
    from geosched.policies.spotrisk import Rework
    from geosched.store.db import Store

    clouds_of = providers_cli._paired("--provider", tuple(providers), len(cluster_names))
    for provider in {c or EKS for c in clouds_of}:
        if provider not in (EKS, GKE):
            raise InputError("--provider", "", f"expected {EKS} or {GKE}, got {provider[:40]!r}")
        if class_name not in provreq.CLASSES:
            raise InputError("--provisioning-class", "", f"{class_name[:80]!r} is not one of "
                             f"{', '.join(provreq.CLASSES)}")
        if provider == EKS and class_name not in provreq.EKS_CLASSES:
            raise InputError("--provisioning-class", "", f"{class_name} is GKE's (its Dynamic Workload Scheduler): "
                             f"use it with --provider gcp; on EKS cluster-autoscaler serves "
                             f"{' and '.join(provreq.EKS_CLASSES)}")
    if out is not None and not dry_run:
        cliparts.check_rendered_out(out, PROVISIONING_HEADER, PROVISIONING_WRITER)
    job = read_job_file(job_file)
    gpu = f"{job.job.gpu}:{job.job.gpus_per_worker}"
    with Store(cliparts.state_home(ctx)) as store:
        plan, places, _, _ = providers_cli._nodegroup_sites(
            ctx, store, cluster_names, None, gpu, job.job.workers, pricing, [c or EKS for c in clouds_of], regions,
            Weights(network=0.0, cost=DEFAULT_WEIGHTS.cost, carbon=DEFAULT_WEIGHTS.carbon,
                    spot_risk=DEFAULT_WEIGHTS.spot_risk), Rework(1.0, 0.25), True)
    if not any(p.targets for p in places):
        reasons = "; ".join(sorted({s.reason for p in places for s in p.skipped})) or "no offering"
        named = ", ".join(cluster_names)
        render.error(f"no zone of cluster{'s' if len(places) > 1 else ''} {named} holds {job.job.workers} x {gpu}: "
                     f"{reasons}")
        raise typer.Exit(EXIT_NO_FIT)
    configs = load_cluster_config(clusters) if clusters is not None else {}
    through = (f"ProvisioningRequestConfig {{}} ({class_name})" if not without_kueue else
               f"ProvisioningRequest {{}} ({class_name})")

    def rendered(pin: provreq.Target, namespace: str) -> list[dict[str, Any]]:
        if without_kueue:
            return provreq.render_request(job, pin, namespace=namespace)
        # geosched's own LocalQueue, named as its ClusterQueue (provreq.queue_name), not the cluster's configured
        # `queue`: that one is the team's, bound to the team's ClusterQueue (Kueue's LocalQueue spec.clusterQueue
        # is immutable), and one LocalQueue for gangs of two GPUs would be bound to one of their queues only.
        return provreq.render(job, pin, queue=None, namespace=namespace)

    def noted(zone: provfailover.Zone, shape: str) -> str:
        kind = "ProvisioningRequestConfig" if not without_kueue else "ProvisioningRequest"
        asked = through.format(next((str(m["metadata"]["name"]) for m in zone.render() if m["kind"] == kind), ""))
        return (f"{job.job.workers} x {shape} asked of the autoscaler in {zone.where} through {asked}, "
                f"${zone.candidate.usd_per_hour or 0.0:,.2f}/h at the catalog's {pricing.value} price once up"
                + (" (flex-start capacity is billed at its own rate)" if class_name == provreq.QUEUED_PROVISIONING
                   else ""))

    from functools import partial

    from geosched.cli import provfailover

    zones: list[provfailover.Zone] = []
    shapes: list[str] = []
    for place in places:
        context = contexts.get(place.name) or place.name
        config = configs.get(context) or next((c for c in configs.values() if c.context == context), None)
        namespace = job.namespace or (config.namespace if config else None) or "default"
        for t in place.targets:
            pin, shape, where = _pin(place.backend.provider, t, class_name)
            zones.append(provfailover.Zone(t.candidate, where if len(places) == 1 else f"{where}, cluster "
                                           f"{place.name}", partial(rendered, pin, namespace),
                                           cluster=place.name, context=context, namespace=namespace,
                                           kept=provreq.kept(job),
                                           kubeconfig=None if kubeconfig is None else str(kubeconfig.resolve())))
            shapes.append(shape)
    first = zones[0]
    note = noted(first, shapes[0])
    if out is not None and not dry_run:
        import sys

        from geosched.core.errors import escape
        from geosched.files.writes import write_file
        from geosched.kube.render import to_yaml

        objects, queue_note = (first.render(), None) if without_kueue else _gitops_queue(first, kubeconfig, out)
        write_file(out, PROVISIONING_HEADER + to_yaml(objects))
        # The path as given may hold an ESC or a line break: escaped as error lines are (written without rich,
        # which would strip them).
        sys.stdout.write(f"wrote {escape(str(out))}\n")
        if queue_note:
            _say(output)(queue_note)
        _say(output)(f"{note}; commit it for your GitOps to apply (geosched created nothing)")
        return
    outcome = SubmitOutcome(job.name, "dry-run", cluster=first.cluster, context=first.context,
                            zones=(first.candidate.zone,), manifests=tuple(first.render()), assumptions=(note,))
    if not dry_run:
        from geosched.kube.client import Kube
        from geosched.providers.gang import check_gang_name, new_gang_name

        if gang:
            check_gang_name(gang)
        gang = gang or new_gang_name()
        if not yes:
            more = f" (then the next of {len(zones) - 1} more zones if it fails)" if len(zones) > 1 else ""
            typer.confirm(f"Queue {job.name} on cluster {first.cluster}: {note}{more}?", abort=True)

        def open_kube(zone: provfailover.Zone) -> Kube:
            return Kube.open(zone.context, kubeconfig, name=zone.cluster)

        with Store(cliparts.state_home(ctx)) as store:
            queued = provfailover.queue_across(store, zones, open_kube=open_kube, gang=gang, request=plan.request,
                                               settings=provfailover.Settings(timeout_s=timeout_s),
                                               say=_say(output))
        landed = queued.zone
        note = noted(landed, shapes[zones.index(landed)])
        outcome = SubmitOutcome(job.name, "applied", cluster=landed.cluster, context=landed.context,
                                zones=(landed.candidate.zone,), applied=queued.applied,
                                assumptions=(note, queued.state.line()))
    emit_document(kube_cli.outcome_doc(outcome), output, lambda: kube_cli._print_outcome(outcome),
                  no_headers=no_headers)
    _say(output)(note)


def _pin(provider: str, target: Target, class_name: str) -> tuple[provreq.Target, str, str]:
    """Where a ProvisioningRequest pins the gang in one zone of the plan: the pin, the nodes' shape and the zone,
    as the messages say them. GKE: zone and accelerator; EKS: the zone's name and the instance type."""
    from geosched.kube import provreq
    from geosched.providers.nodegroups import gkespec

    c = target.candidate
    if provider == GKE:
        accelerator = gkespec.accelerator(c.instance_type, c.gpu)
        assert accelerator is not None, "targets() keeps only zones whose accelerator type is known"
        return (provreq.Target(zone=c.zone, gpu_label=keys.GKE_ACCELERATOR, gpu_value=accelerator,
                               class_name=class_name), f"{c.instance_type} ({accelerator})", c.zone)
    return (provreq.Target(zone=target.zone_name, gpu_label=keys.INSTANCE_TYPE, gpu_value=c.instance_type,
                           class_name=class_name, tolerations=(provreq.EKS_GPU_TAINT,)),
            c.instance_type, f"{target.zone_name} ({c.zone})")


def sleep_until(at: float) -> None:
    """Block until epoch time `at` (wall clock: a Capacity Block starts at a UTC time), in steps of at most a
    minute so a clock step or a suspended machine is caught up with."""
    while (left := at - time.time()) > 0:
        time.sleep(min(left, 60.0))


class _Joiner:
    """`launch.Join` for `up`: wait until a new group's nodes are Ready in its cluster (kube/nodejoin.py), on the
    context paired with that cluster; nodes not Ready by the deadline are a `NotJoined` (the next zone). Remembers
    the context it asked last, for the error when a cluster cannot be asked at all."""

    def __init__(self, contexts: dict[str, str | None], kubeconfig: Path | None, timeout_s: float) -> None:
        self.contexts, self.kubeconfig, self.timeout_s = contexts, kubeconfig, timeout_s
        self.context: str | None = None
        self.ready: dict[str, tuple[str, ...]] = {}  # group -> its Ready nodes
        self.kinds: dict[str, str] = {}  # group -> what its cloud calls it ("node group", "node pool")

    def __call__(self, new: NewGroup) -> None:
        from geosched.kube.client import Kube
        from geosched.kube.nodejoin import NodesNotReady, wait_ready
        from geosched.providers.nodegroups.backend import NotJoined

        self.context = self.contexts.get(new.cluster) or new.cluster
        self.kinds[new.name] = new.kind
        with Kube.open(self.context, self.kubeconfig) as kube:
            try:
                self.ready[new.name] = wait_ready(kube, {GROUP_LABELS[new.provider]: new.name}, new.nodes,
                           what=f"{new.kind} {new.name} (cluster {new.cluster})", timeout_s=self.timeout_s,
                           needs=keys.GPU)
            except NodesNotReady as exc:
                raise NotJoined(str(exc)) from None


def _warn_without_plugin(clusters: Sequence[str], contexts: dict[str, str | None], kubeconfig: Path | None) -> None:
    """Before any capacity is bought: a warning for each cluster where nothing would advertise the new nodes' GPUs
    (kube/nodejoin.py `plugin_warning`), which would otherwise show only after --join-timeout of billed nodes. A
    cluster that cannot be read now says nothing here: the wait for its nodes reports it."""
    from geosched.console import render
    from geosched.kube import cli as kube_cli
    from geosched.kube.client import Kube
    from geosched.kube.nodejoin import plugin_warning

    for name in clusters:
        try:
            with Kube.open(contexts.get(name) or name, kubeconfig, name=name) as kube:
                note = plugin_warning(kube)
        except Exception as exc:
            if not kube_cli._unreachable(exc) and not isinstance(exc, GeoschedError):
                raise
            continue
        if note is not None:
            render.err.print(f"warning: {note}", markup=False, highlight=False, soft_wrap=True)


def _up_failed(ctx: typer.Context, gang: str, exc: Exception, context: str | None) -> Exception:
    """The error `up` ends with once the gang exists: a geosched error's line, or that the cluster could not be
    reached, followed by what happened to the gang's groups. Before the gang was journalled (bad input, no
    credentials) nothing exists to delete and the error is unchanged; so is anything else (a bug)."""
    from geosched.kube import cli as kube_cli

    unreachable = not isinstance(exc, GeoschedError) and kube_cli._unreachable(exc)
    if not (isinstance(exc, GeoschedError) or unreachable) or not _journalled(ctx, gang):
        return exc
    if unreachable:
        from geosched.kube.client import describe

        return UpFailed(f"cannot reach cluster {context}: {describe(exc)}; {_teardown(ctx, gang)}")
    return UpFailed(f"{exc}; {_teardown(ctx, gang)}")


def _interrupted(ctx: typer.Context, gang: str) -> BaseException:
    """Ctrl-C once the gang exists: all or nothing still holds, the process being alive to keep it (a group
    ACTIVE and billed was left, the gang `provisioning` for ever, and click said only "Aborted"). A second Ctrl-C
    during the deletion leaves what is left to `geosched down GANG`, which the journal makes whole."""
    if not _journalled(ctx, gang):
        return KeyboardInterrupt()
    from geosched.console import render
    render.err.print(f"interrupted: deleting gang {gang}'s node group (Ctrl-C again leaves it to `geosched down "
                     f"{gang}`)", markup=False, highlight=False, soft_wrap=True)
    return UpFailed(f"interrupted; {_teardown(ctx, gang)}")


@contextmanager
def _lease(ctx: typer.Context, gang: str) -> Iterator[None]:
    """The gang's lease (providers/lease.py) for `up`, on a store connection of its own."""
    from geosched.providers import lease
    from geosched.store.db import Store

    with Store(cliparts.state_home(ctx)) as store, lease.held(store, gang, "up"):
        yield


def _journalled(ctx: typer.Context, gang: str) -> bool:
    from geosched.providers import journal
    from geosched.store.db import Store

    with Store(cliparts.state_home(ctx)) as store:
        return journal.gang_record(store, gang) is not None


def _probe(ctx: typer.Context, group: str, ready: Sequence[str], context: str, kubeconfig: Path | None,
           clusters: Path | None, namespace: str | None, provider: str, image: str, timeout_s: float,
           say: Callable[[str], None]) -> NetworkView | None:
    """Measure the links between the group's Ready nodes over the cluster (kube/netprobe/), in the job's namespace,
    the probe pods tolerating the group's GPU taint; the samples go to the store (as `geosched probe`'s do) and the
    view to the placement. A probe that cannot run is a warning: the gang is placed on the network model, as
    without --probe."""
    from geosched.kube.client import NODES, Kube
    from geosched.kube.config import load_cluster_config
    from geosched.kube.netprobe.pods import ProbeSettings
    from geosched.kube.netprobe.run import probe_nodes, to_view, zone_of
    from geosched.kube.nodejoin import selector_text
    from geosched.store.db import Store

    if namespace is None and clusters is not None:
        configs = load_cluster_config(clusters)
        found = next((c for c in configs.values() if c.context == context), configs.get(context))
        namespace = found.namespace if found is not None else None
    namespace = namespace or "default"
    try:
        with Kube.open(context, kubeconfig) as kube:
            listed, _ = kube.list_all(NODES.path(), label_selector=selector_text({GROUP_LABELS[provider]: group}))
            nodes = {str(n["metadata"]["name"]): zone_of(n) for n in listed if n["metadata"]["name"] in set(ready)}
            result = probe_nodes(kube, nodes, namespace=namespace, tolerations=[group_taint(provider)],
                                 settings=ProbeSettings(image=image), timeout_s=timeout_s)
    except Exception as exc:
        from geosched.kube import cli as kube_cli
        from geosched.kube.client import describe

        if not (isinstance(exc, GeoschedError) or kube_cli._unreachable(exc)):
            raise
        say(f"warning: probing the nodes of {group} failed ({describe(exc)}); placing on the network model")
        return None
    report = result.report
    measured = report.measured_pairs
    if result.leftover:
        say(f"warning: probe pods left in namespace {namespace}: {', '.join(result.leftover)}; delete them")
    for failure in report.failures[:3]:
        say(f"warning: probe {failure.subject}: {failure.kind.value}: {failure.reason}")
    if len(report.failures) > 3:
        say(f"warning: {len(report.failures) - 3} more probe failures")
    say(f"probed {measured} node pairs of {group} over the cluster in {report.wall_s:.0f} s (run {result.run}, "
        f"{result.created} pods, all deleted)" if not result.leftover else
        f"probed {measured} node pairs of {group} over the cluster in {report.wall_s:.0f} s")
    if measured == 0:
        return None
    view, samples = to_view(report, nodes)
    with Store(cliparts.state_home(ctx)) as store:
        store.add_samples(samples)
    return view


def _submit(job_file: Path, group: str, context: str, kubeconfig: Path | None, clusters: Path | None,
            policy: str, weights: Weights, provider: str = EKS, network: NetworkView | None = None) -> SubmitOutcome:
    """`submit` on the cluster's context only, its inventory restricted to the group's (Ready) nodes."""
    from geosched.kube import submit as submitting
    from geosched.kube.config import ClusterConfig, load_cluster_config

    labels = {GROUP_LABELS[provider]: group}
    configs = load_cluster_config(clusters) if clusters is not None else {
        context: ClusterConfig(name=context, context=context)}
    options = submitting.SubmitOptions(policy=policy, weights=weights, node_labels=labels)
    return submitting.submit(job_file, kubeconfig=kubeconfig, contexts=(context,),
                             clusters={name: on_the_group(c, provider) for name, c in configs.items()},
                             network=network, options=options)


def on_the_group(config: ClusterConfig, provider: str = EKS) -> ClusterConfig:
    """The cluster's config as `up` submits with it: the pods pinned to the placed hosts (otherwise only the zone and
    GPU model are required, and kube-scheduler may take the cluster's other nodes there) and tolerating the group's
    own taint (a cluster without the ExtendedResourceToleration admission plugin would otherwise keep the gang off
    its own nodes)."""
    own = group_taint(provider)
    return replace(config, pin_hosts=True, tolerations=(*config.tolerations, own) if own not in config.tolerations
                   else config.tolerations)


def _charge_to_job(ctx: typer.Context, gang: str, job: str) -> None:
    """The group is the job's capacity: its ledger rows name the job (nodegroups/journal.py `charge_to_job`)."""
    from geosched.providers.nodegroups import journal as nodegroup_journal
    from geosched.store.db import Store

    with Store(cliparts.state_home(ctx)) as store:
        nodegroup_journal.charge_to_job(store, gang, job)


def _teardown(ctx: typer.Context, gang: str) -> str:
    """Delete the gang's node group (as `geosched down GANG`); what happened, for the error line."""
    from geosched.providers.nodegroups import launch as nodegroup_launch
    from geosched.store.db import Store

    with Store(cliparts.state_home(ctx)) as store, providers_cli._provision_log(ctx, gang, False, Output.JSON,
                                                                                verb="down"):
        down = nodegroup_launch.down(store, gang)
    if down.errors:
        return f"deleting gang {gang}'s node group failed ({'; '.join(down.errors)}): run `geosched down {gang}`"
    return f"gang {gang}'s node group was deleted"


def _say(output: Output) -> Callable[[str], None]:
    from geosched.console import render
    def say(line: str) -> None:
        if output.tabular:
            render.err.print(line, markup=False, highlight=False, soft_wrap=True)
    return say
