"""The usage ledger charges the node groups (EKS, moto) and node pools (GKE double) geosched creates: one node
interval per node, opened when the group exists (from its intent, just before the create call), closed when `down`
(or the rollback of a failed group) saw it deleted; `geosched report` prices them at the catalog's price of their
time, idle time included, and says so. Real HTTP to moto's server (behind the fault proxy) and to the GKE double.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from geosched.core import catalog
from geosched.core.models import Pricing
from geosched.core.retry import RetryPolicy
from geosched.providers.gang import plan_gang
from geosched.providers.nodegroups import journal as groups_journal
from geosched.providers.nodegroups.eks import Eks
from geosched.providers.nodegroups.gke import Gke
from geosched.providers.nodegroups.launch import GroupResult, GroupSettings, down, provision, read_cluster
from geosched.report.ledger import ledger_intervals
from geosched.report.records import Interval
from geosched.report.report import report
from geosched.store import usage
from geosched.store.db import Store
from geosched_emulators import Ec2Fault, Ec2FaultProxy, MotoServer
from geosched_emulators.eks_extras import capacity_issue
from geosched_emulators.gke import GkeDouble
from tests.providers import gke_support
from tests.providers.eks_support import NODE_ROLE, REGION, ZONES, EksCluster, make_cluster, request
from tests.providers.prov_support import aws_provider, gcp_provider

pytestmark = pytest.mark.integration

HOUR_S = 3600.0


def fast() -> GroupSettings:
    return GroupSettings(poll_s=0.01, call_timeout_s=5.0, settle_s=1.0,
                         retry=RetryPolicy(attempts=3, initial_s=0.01, max_s=0.05))


@pytest.fixture
def cluster(moto: MotoServer, proxy: Ec2FaultProxy) -> Iterator[EksCluster]:
    yield make_cluster(moto.url)


@pytest.fixture
def gke() -> Iterator[GkeDouble]:
    with GkeDouble(operation_delay_s=0.05) as double:
        gke_support.make_cluster(double)
        yield double


def run_eks(store: Store, cluster: EksCluster, gang: str) -> GroupResult:
    eks = Eks(REGION, node_role=NODE_ROLE)
    plan = plan_gang(request(2), {"aws": aws_provider((REGION,))}, store)
    return provision(plan, read_cluster(eks, cluster.name, fast()), eks, store, gang=gang, settings=fast())


def gke_backend(gke: GkeDouble) -> Gke:
    return Gke(gke_support.LOCATION, project=gke_support.PROJECT, endpoint=gke.endpoint)


def run_gke(store: Store, gke: GkeDouble, gang: str) -> GroupResult:
    b = gke_backend(gke)
    plan = plan_gang(gke_support.request(2), {"gcp": gcp_provider("http://127.0.0.1:9")}, store)
    return provision(plan, read_cluster(b, gke_support.CLUSTER, fast()), b, store, gang=gang, settings=fast())


def rows(store: Store, gang: str) -> list[Interval]:
    return sorted((i for i in ledger_intervals(store) if i.job == gang), key=lambda i: (i.start, i.name))


def cost_report(store: Store, now: float) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(report(store, "cost", "job", output="json", now=now).text or "{}")
    return doc


def catalog_usd(provider: str, instance_type: str, zone: str) -> float:
    price = catalog.offering_index()[(provider, instance_type, zone)].price(Pricing.ON_DEMAND)
    assert price is not None
    return price


def check_charged(store: Store, gang: str, cluster: str, provider: str, instance_type: str, gpu: str,
                  before: float, after: float, down_of: Any) -> None:
    """provision -> a report two hours on charges the group's nodes for those two hours, idle as they are ->
    down -> every interval closed when the group was gone."""
    opened = rows(store, gang)
    assert len(opened) == 2, opened
    intent = groups_journal.groups(store, gang=gang)[0].created_at
    zone = opened[0].zone
    assert zone is not None
    for i in opened:
        assert (i.kind, i.provider, i.cluster, i.instance_type, i.gpu, i.gpus, i.pricing, i.end) == (
            "node", provider, cluster, instance_type, gpu, 8, Pricing.ON_DEMAND, None)
        assert i.start == intent and before <= i.start <= after  # from the group's intent, before the create call
        assert i.nodegroup
    usd_h = catalog_usd(provider, instance_type, zone)
    at = intent + 2 * HOUR_S  # a report two hours after the create: nothing ran on the nodes, all is charged
    doc = cost_report(store, at)
    (row,) = [r for r in doc["rows"] if r["job"] == gang]
    assert row["gpu_hours"] == pytest.approx(2 * 8 * 2.0)
    assert row["cost_usd"] == pytest.approx(2 * 2.0 * usd_h)
    assert row["priced_from"] == "catalog"
    assert any("node-group capacity" in n and "idle time included" in n for n in doc["notes"]), doc["notes"]
    table = report(store, "cost", "job", now=at)  # the table says it in its caption (notes are for md and json)
    assert "node-group capacity charged from create to `down`, idle time included" in (table.caption or "")

    before_down = time.time()
    result = down_of()
    assert (result.state, result.errors) == ("terminated", ())
    closed = rows(store, gang)
    assert [i.name for i in closed] == [i.name for i in opened], "down closes the rows, it adds none"
    for i in closed:
        assert i.end is not None and before_down <= i.end <= time.time()
    doc = cost_report(store, at)
    (row,) = [r for r in doc["rows"] if r["job"] == gang]
    held_h = (closed[0].end - intent) / HOUR_S  # type: ignore[operator]
    assert row["cost_usd"] == pytest.approx(2 * held_h * usd_h)
    assert row["cost_usd"] < 0.01 * 2 * 2.0 * usd_h  # seconds, not the two hours of the open rows


def test_an_eks_node_group_is_charged_from_create_to_down(store: Store, cluster: EksCluster) -> None:
    before = time.time()
    result = run_eks(store, cluster, "u-eks")
    assert result.ok, result.message
    check_charged(store, "u-eks", cluster.name, "aws", "p4d.24xlarge", "A100", before, time.time(),
                  lambda: down(store, "u-eks", settings=fast()))
    assert cluster.groups() == {}


def test_a_gke_node_pool_is_charged_from_create_to_down(store: Store, gke: GkeDouble) -> None:
    before = time.time()
    result = run_gke(store, gke, "u-gke")
    assert result.ok, result.message
    b = gke_backend(gke)
    check_charged(store, "u-gke", gke_support.CLUSTER, "gcp", gke_support.MACHINE, "H100", before, time.time(),
                  lambda: down(store, "u-gke", backend_for=lambda _p, _r: b, settings=fast()))


def test_a_group_failed_for_capacity_is_charged_until_its_deletion(store: Store, cluster: EksCluster,
                                                                   proxy: Ec2FaultProxy) -> None:
    # The cloud may have launched (and billed) some of a failed group's instances: its nodes are charged until
    # the rollback saw it gone, and the next zone's group from its own intent.
    proxy.nodegroups.set(ZONES["use1-az1"], "CREATE_FAILED", [capacity_issue("p4d.24xlarge", ZONES["use1-az1"])])
    result = run_eks(store, cluster, "u-fail")
    assert result.ok, result.message
    failed, made = groups_journal.groups(store, gang="u-fail")
    assert (failed.state, made.state) == ("deleted", "created")
    found = rows(store, "u-fail")
    assert [(i.zone, i.end is None) for i in found] == [("use1-az1", False)] * 2 + [("use1-az2", True)] * 2
    assert all(i.end <= made.created_at for i in found[:2])  # type: ignore[operator]


def test_a_refused_create_charges_nothing(store: Store, cluster: EksCluster, proxy: Ec2FaultProxy) -> None:
    # EKS API reference CreateNodegroup errors: ResourceLimitExceededException (400). A refused create made
    # nothing: no interval is opened (injected: moto never refuses a create for a limit).
    proxy.inject(Ec2Fault.error("ResourceLimitExceededException", "You have encountered a service limit on the "
                                "specified resource."), action=f"POST /clusters/{cluster.name}/node-groups")
    result = run_eks(store, cluster, "u-refused")
    assert not result.ok
    assert [r.state for r in groups_journal.groups(store, gang="u-refused")] == ["deleted"]
    assert rows(store, "u-refused") == []


def test_a_group_up_made_for_a_job_is_the_jobs_cost_counted_once(store: Store, cluster: EksCluster) -> None:
    # `up` charges the group to its job (`charge_to_job`); `geosched jobs` later records the job's own run on the
    # group's nodes (a kube job row, as kube/submit.py writes it). `--usage auto` counts the nodes, idle time and
    # all, and not the job's share of them a second time.
    result = run_eks(store, cluster, "u-up")
    assert result.ok, result.message
    assert groups_journal.charge_to_job(store, "u-up", "train") == 2
    intent = groups_journal.groups(store, gang="u-up")[0].created_at
    usage.open_interval(store, kind="job", name="ml/train", job="train", provider="aws", region=REGION,
                        zone="use1-az1", cluster="eks-us-east-1", instance_type="p4d.24xlarge", gpu="A100", gpus=16,
                        source="kube", start=intent + HOUR_S, ref="uid-train")
    at = intent + 2 * HOUR_S
    usd_h = catalog_usd("aws", "p4d.24xlarge", "use1-az1")
    doc = cost_report(store, at)
    assert [(r["job"], r["intervals"]) for r in doc["rows"]] == [("train", 2)]
    assert doc["rows"][0]["cost_usd"] == pytest.approx(2 * 2.0 * usd_h)  # two nodes for two hours, not more
    jobs_only: dict[str, Any] = json.loads(report(store, "cost", "job", output="json", now=at,
                                                  usage="job").text or "{}")
    assert [(r["job"], r["intervals"]) for r in jobs_only["rows"]] == [("train", 1)]  # the job's own row is there
    assert (down(store, "u-up", settings=fast()).state, [i.end is None for i in rows(store, "train")]) == (
        "terminated", [False, False, True])  # the group's rows closed; the job's is the sync's to close
