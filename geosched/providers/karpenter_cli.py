"""`provision --cluster NAME --karpenter` and `up JOB --cluster NAME --karpenter`: the gang's capacity as a Karpenter
NodePool + EC2NodeClass for the user's GitOps, in the zone geosched chose. The CLI layer: checks the options,
plans, reads the cluster, renders, writes.

The same plan and cluster read as a managed node group (`provision --cluster`: plan.py ranks the zones by price,
carbon and spot risk; the EKS cluster's subnets say which zones it can hold and each zone's *name* in this
account), the first `--zones` zones the cluster holds are chosen, and `nodegroups/karpenter.py` renders the two
objects for each, the pools weighted in plan order (Karpenter itself fails over to the next when a zone has no
capacity); with a job (`up`), the job follows, its pods pinned to the pools and held to one zone
(`nodegroups/karpenter_pin.py`). The YAML stream goes to stdout or `--out FILE` (written whole, atomically; a
file there is replaced only when --karpenter wrote it, `check_out`, so FILE may sit in a `gitops render` tree):
commit it, and Argo CD or Flux applies it; Karpenter launches the nodes when the pods are pending.

geosched creates nothing in the cloud or the cluster here, so nothing is journaled and `down` has nothing to
delete: removing the file from the repository removes the pool, and Karpenter its nodes. Only the cluster is read
(DescribeCluster, DescribeSubnets). The store keeps one line of each render (`store/uncharged.py`: gang, cluster,
pools, destination), only so that `report` says the gang's nodes are not charged: no ledger row stands for them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from geosched import settings as settings_table
from geosched.clouds import aws as aws_cloud
from geosched.console import render
from geosched.console.output import Output
from geosched.core.errors import EXIT_NO_FIT, InputError, escape
from geosched.core.models import Weights
from geosched.policies.spotrisk import Rework
from geosched.providers import cliparts, journal
from geosched.providers.gang import check_gang_name, new_gang_name, plan_gang
from geosched.providers.nodegroups import karpenter
from geosched.providers.plan import GangRequest, PricingMode
from geosched.settings import environ
from geosched.store.db import Store

if TYPE_CHECKING:
    from geosched.kube.jobinput import JobInput


# The first line of every file `--karpenter` writes: what makes a file at --out geosched's to replace, as the files
# of a `gitops render` tree carry a marker (geosched/gitops/files.py `wrote`). The file may sit in such a tree
# (clusters/<cluster>/<namespace>/, beside the jobs a render wrote): without the marker there, it is nobody's to
# overwrite, and a render's files (marked by their digest, not this line) are not --karpenter's either; a render
# in turn leaves this file alone, it carries no digest.
HEADER = "# Written by `geosched --karpenter`: Karpenter NodePools and EC2NodeClasses, and the job pinned to them.\n"


def check_out(out: Path) -> None:
    """--out may create a file, or replace one --karpenter wrote (`cliparts.check_rendered_out`)."""
    cliparts.check_rendered_out(out, HEADER, "geosched --karpenter")


def role(cluster: str, given: str | None) -> str:
    """The IAM role name of the EC2NodeClass: --node-role (a name or an ARN), else $GEOSCHED_EKS_NODE_ROLE, else
    the name Karpenter's getting-started guide creates, KarpenterNodeRole-<cluster>."""
    text = given or settings_table.from_environment(cliparts.NODE_ROLE, environ())
    if text is None:
        return f"KarpenterNodeRole-{cluster}"[:64]
    name = karpenter.role_name(text)
    if name is None:
        raise InputError("--node-role", "", f"expected an IAM role name (1-64 of letters, digits and +=,.@_-) or "
                         f"role ARN, got {text[:120]!r}")
    return name


def render_pool(ctx: typer.Context, cluster_name: str, node_role: str | None, gpu: str, nodes: int,
                pricing: PricingMode, provider: list[str], regions: list[str], weights: Weights, rework: Rework,
                name: str | None, dry_run: bool, output: Output, no_headers: bool, out: Path | None,
                ami: str, expire_after: str, zones: int = 1, job: JobInput | None = None) -> None:
    """Plan, read the cluster, render the pool (and the pinned job) and write it; the plan alone on a dry run."""
    if cliparts.cluster_cloud(cliparts.split_names(provider)) != aws_cloud.NAME:
        raise InputError("--karpenter", "", "a Karpenter EC2NodeClass is for EKS (--provider aws); on GKE use a node "
                         "pool (--provider gcp without --karpenter)")
    if not cliparts.CLUSTER_NAME_RE.match(cluster_name):
        raise InputError("--cluster", "", f"{cluster_name[:120]!r} is not an EKS cluster name (1-100 letters, "
                         "digits, '-' and '_', starting with a letter or digit)")
    try:
        family = karpenter.Ami(ami)
    except ValueError:
        raise InputError("--ami", "", f"expected one of {', '.join(a.value for a in karpenter.Ami)}, "
                         f"got {ami[:40]!r}") from None
    problem = karpenter.expire_problem(expire_after)
    if problem is not None:
        raise InputError("--expire-after", "", problem)
    node_role_name = role(cluster_name, node_role)
    if out is not None and not dry_run:
        check_out(out)
    if name:
        check_gang_name(name)
    region = cliparts.cluster_region(cliparts.split_names(regions))
    model, per_node = cliparts.parse_gpu(gpu)
    request = GangRequest(gpu=model, gpus_per_node=per_node, nodes=nodes, pricing=pricing, providers=(aws_cloud.NAME,),
                          regions=(region,), weights=weights, rework=rework)
    from geosched.providers.nodegroups import launch as nodegroup_launch
    from geosched.providers.nodegroups.eks import Eks  # boto3: loaded when used (tests/test_cli_startup.py)

    backend = Eks(region, node_role=None)
    providers = cliparts.build_providers((aws_cloud.NAME,), cliparts.provider_settings(ctx))
    if not dry_run:
        providers = cliparts.with_credentials(providers)
    with Store(cliparts.state_home(ctx)) as store:
        plan = plan_gang(request, providers, store)
        cluster = nodegroup_launch.read_cluster(backend, cluster_name)
        targets, skipped = backend.targets(plan, cluster)
        if dry_run or not targets:
            cliparts.show_nodegroup_plan(cluster.name, targets, skipped, nodes, output, no_headers, dry_run)
            if not targets:
                render.error(f"no zone of cluster {cluster_name} holds {nodes} x {model}:{per_node} under these "
                             "constraints")
                raise typer.Exit(EXIT_NO_FIT)
            return
        owner = journal.owner(store)
    gang = name or new_gang_name()
    pools = karpenter.pools(targets, zones, gang=gang, owner=owner, nodes=nodes, gpus_per_node=per_node,
                            role=node_role_name, ami=family, expire_after=expire_after)
    manifests = karpenter.manifests(pools)
    if job is not None:
        from geosched.providers.nodegroups.karpenter_pin import pinned, unlaunchable

        pinned_job = pinned(job, pools)
        manifests += pinned_job
        # Written anyway (the job's own constraint, as `gitops render` writes a pin no node admits), said first.
        for line in unlaunchable(pinned_job, job, pools):
            render.err.print(f"warning: {line}", markup=False, highlight=False, soft_wrap=True)
    from geosched.kube.render import to_yaml

    text = HEADER + to_yaml(manifests)
    c = targets[0].candidate
    first = pools[0]
    summary = (f"NodePool {first.name}: {nodes} x {c.instance_type} {first.capacity_type} in {first.zone_name} "
               f"({c.zone}, cluster {cluster_name}), ${c.usd_per_hour:,.2f}/h once Karpenter has launched them")
    if len(pools) > 1:
        summary += ("; should that zone refuse, Karpenter tries "
                    + ", ".join(f"{p.name} in {p.zone_name}" for p in pools[1:]) + " in this order, the gang whole "
                    "in one zone")
    if out is None:
        sys.stdout.write(text)
    else:
        from geosched.files.writes import write_file

        write_file(out, text)
        # The path as given may hold an ESC or a line break: escaped as error lines are (written without rich,
        # which would strip them).
        sys.stdout.write(f"wrote {escape(str(out))}\n")
    # Remembered once written, so `report` can say this gang's capacity is not charged (store/uncharged.py):
    # geosched never applies the pools, and Karpenter's nodes have no ledger row.
    from geosched.store.uncharged import record_karpenter

    with Store(cliparts.state_home(ctx)) as store:
        record_karpenter(store, gang=gang, cluster=cluster_name, region=region, pools=[p.name for p in pools],
                         instance_type=c.instance_type, capacity_type=first.capacity_type, nodes=nodes,
                         destination=str(out) if out is not None else "stdout")
    render.err.print(f"{summary}; commit it for your GitOps to apply (geosched created nothing: deleting the "
                     "objects deletes the pool, and Karpenter its nodes)", markup=False, highlight=False,
                     soft_wrap=True)
