"""EKS managed node groups for a gang, end to end on moto's server (real HTTP, real boto3 through the standard
AWS variables): the group in the zone the plan chose, failover to the next zone when a group fails for capacity,
the deadline, and `down` deleting geosched's groups and nothing else.

moto creates every group ACTIVE at once and never fails one (moto/eks/models.py); the CREATING and CREATE_FAILED
answers come from the fault proxy's node group overrides (emulators/geosched_emulators/eks_extras.py), only where moto
cannot. AWS shapes: EKS API reference CreateNodegroup, DescribeNodegroup (Nodegroup, NodegroupHealth, Issue),
DeleteNodegroup, ListNodegroups.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest

from geosched.core.errors import InputError
from geosched.providers import journal
from geosched.providers.gang import plan_gang
from geosched.providers.nodegroups import journal as groups_journal
from geosched.providers.nodegroups.eks import Eks
from geosched.providers.nodegroups.launch import GroupSettings, down, provision, read_cluster
from geosched.providers.plan import PricingMode
from geosched.store.db import Store
from geosched_emulators import Ec2Fault, Ec2FaultProxy, MotoServer
from geosched_emulators.eks_extras import capacity_issue
from tests.providers.eks_support import NODE_ROLE, REGION, ZONES, EksCluster, make_cluster, request
from tests.providers.groups_support import fast
from tests.providers.prov_support import aws_provider

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(moto: MotoServer, proxy: Ec2FaultProxy) -> Iterator[EksCluster]:
    yield make_cluster(moto.url)


def run(store: Store, cluster: EksCluster, gang: str, settings: GroupSettings | None = None,
        pricing: PricingMode = PricingMode.ON_DEMAND):  # type: ignore[no-untyped-def]
    eks = Eks(REGION, node_role=NODE_ROLE)
    plan = plan_gang(request(2, pricing), {"aws": aws_provider((REGION,))}, store)
    found = read_cluster(eks, cluster.name, settings or fast())
    return provision(plan, found, eks, store, gang=gang, settings=settings or fast())


def test_the_group_goes_into_the_first_zone_with_the_gang_pinned(store: Store, cluster: EksCluster) -> None:
    result = run(store, cluster, "g-first")
    assert result.ok, result.message
    groups = cluster.groups()
    assert list(groups) == ["g-first-1"]
    g = groups["g-first-1"]
    assert g["subnets"] == [cluster.subnets["use1-az1"]]  # the plan's first zone, the cluster's subnet there
    assert g["instanceTypes"] == ["p4d.24xlarge"]
    assert g["capacityType"] == "ON_DEMAND"
    assert g["scalingConfig"] == {"minSize": 2, "maxSize": 2, "desiredSize": 2}
    assert g["labels"] == {"geosched.io/gang": "g-first"}
    assert g["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    owner = journal.owner(store)
    assert g["tags"] == {"geosched-gang": "g-first", "geosched-owner": owner, "geosched-attempt": "g-first-1"}
    rows = groups_journal.groups(store, gang="g-first")
    assert [(r.name, r.state, r.zone, r.subnet) for r in rows] == [
        ("g-first-1", "created", "use1-az1", cluster.subnets["use1-az1"])]
    assert journal.gang_record(store, "g-first").state == "ready"  # type: ignore[union-attr]


def test_spot_is_asked_as_spot_capacity(store: Store, cluster: EksCluster) -> None:
    result = run(store, cluster, "g-spot", pricing=PricingMode.SPOT)
    assert result.ok, result.message
    assert cluster.groups()["g-spot-1"]["capacityType"] == "SPOT"


def test_a_zone_without_capacity_fails_over_and_its_group_is_deleted(store: Store, cluster: EksCluster,
                                                                      proxy: Ec2FaultProxy) -> None:
    proxy.nodegroups.set(ZONES["use1-az1"], "CREATE_FAILED", [capacity_issue("p4d.24xlarge", ZONES["use1-az1"])])
    result = run(store, cluster, "g-fail")
    assert result.ok, result.message
    assert result.target is not None and result.target.candidate.zone == "use1-az2"
    groups = cluster.groups()
    assert list(groups) == ["g-fail-2"], "the failed group of the first zone must be gone"
    assert groups["g-fail-2"]["subnets"] == [cluster.subnets["use1-az2"]]
    attempts = journal.attempts(store, "g-fail")
    assert [(a.zone, a.outcome, a.error_kind) for a in attempts] == [
        ("use1-az1", "rolled-back", "capacity"), ("use1-az2", "launched", None)]
    assert "InsufficientInstanceCapacity" in (attempts[0].message or "")
    # Remembered like a machine launch's capacity refusal: the next plan skips the zone for gangs this big.
    blocks = journal.active_blocks(store)
    assert [(b.zone, b.kind, b.min_nodes) for b in blocks] == [("use1-az1", "capacity", 2)]
    assert [r.state for r in groups_journal.groups(store, gang="g-fail")] == ["deleted", "created"]


def test_the_wait_polls_until_active(store: Store, cluster: EksCluster, proxy: Ec2FaultProxy) -> None:
    proxy.nodegroups.set(ZONES["use1-az1"], "CREATING", times=3)
    sleeps: list[float] = []
    result = run(store, cluster, "g-wait", fast(sleep=sleeps.append))
    assert result.ok, result.message
    assert result.target is not None and result.target.candidate.zone == "use1-az1"
    assert sleeps == [0.01, 0.01, 0.01]  # three CREATING answers, then ACTIVE


def test_a_group_that_never_becomes_active_is_deleted_at_the_deadline(store: Store, cluster: EksCluster,
                                                                       proxy: Ec2FaultProxy) -> None:
    for zone in ZONES.values():
        proxy.nodegroups.set(zone, "CREATING")
    ticks = itertools.count(0.0, 100.0)  # every look at the clock is 100 s later
    result = run(store, cluster, "g-slow", fast(active_timeout_s=300.0, clock=lambda: next(ticks)))
    assert not result.ok
    assert cluster.groups() == {}, "every half-created group must be deleted"
    attempts = journal.attempts(store, "g-slow")
    assert [(a.zone, a.outcome, a.error_kind, a.error_code) for a in attempts] == [
        (z, "rolled-back", "stall", "Deadline") for z in ZONES]
    assert journal.gang_record(store, "g-slow").state == "failed"  # type: ignore[union-attr]


def test_down_deletes_the_gangs_groups_and_leaves_a_foreign_one(store: Store, cluster: EksCluster) -> None:
    assert run(store, cluster, "g-down").ok
    # Someone else's group in the same cluster, and one with a geosched name but another store's owner tag.
    cluster.eks.create_nodegroup(clusterName=cluster.name, nodegroupName="team-cpu", nodeRole=NODE_ROLE,
                                 subnets=[cluster.subnets["use1-az1"]], tags={"team": "data"})
    cluster.eks.create_nodegroup(clusterName=cluster.name, nodegroupName="g-other-1", nodeRole=NODE_ROLE,
                                 subnets=[cluster.subnets["use1-az1"]],
                                 tags={"geosched-gang": "g-down", "geosched-owner": "o-another-store"})
    result = down(store, "g-down", settings=fast())
    assert (result.state, result.deleted, result.errors) == ("terminated", 1, ())
    assert sorted(cluster.groups()) == ["g-other-1", "team-cpu"]
    assert journal.gang_record(store, "g-down").state == "terminated"  # type: ignore[union-attr]
    assert [r.state for r in groups_journal.groups(store, gang="g-down")] == ["deleted"]


def test_down_finds_a_tagged_group_the_journal_lost(store: Store, cluster: EksCluster) -> None:
    assert run(store, cluster, "g-tags").ok
    # A second group tagged with the gang's first attempt (a create whose answer, and row, never came back).
    owner = journal.owner(store)
    cluster.eks.create_nodegroup(clusterName=cluster.name, nodegroupName="g-tags-9", nodeRole=NODE_ROLE,
                                 subnets=[cluster.subnets["use1-az2"]],
                                 tags={"geosched-gang": "g-tags", "geosched-owner": owner,
                                       "geosched-attempt": "g-tags-1"})
    result = down(store, "g-tags", settings=fast())
    assert (result.state, result.deleted) == ("terminated", 2), result.errors
    assert cluster.groups() == {}


def test_an_unknown_cluster_is_one_input_error(store: Store, proxy: Ec2FaultProxy) -> None:
    with pytest.raises(InputError) as err:
        read_cluster(Eks(REGION), "no-such-cluster", fast())
    assert "no EKS cluster 'no-such-cluster' in region us-east-1" in str(err.value)


def test_a_quota_refusal_of_the_create_rules_out_the_region_at_once(store: Store, cluster: EksCluster,
                                                                     proxy: Ec2FaultProxy) -> None:
    # EKS API reference CreateNodegroup errors: ResourceLimitExceededException (400), "You have encountered a
    # service limit on the specified resource". Injected because moto never refuses a create for a limit.
    proxy.inject(Ec2Fault.error("ResourceLimitExceededException", "You have encountered a service limit on the "
                                "specified resource."), action=f"POST /clusters/{cluster.name}/node-groups")
    started = time.monotonic()
    result = run(store, cluster, "g-quota", fast(settle_s=600.0))
    assert time.monotonic() - started < 60.0, "a refused create made nothing: no settle wait for it"
    assert not result.ok
    attempts = journal.attempts(store, "g-quota")
    assert [(a.zone, a.outcome, a.error_kind) for a in attempts] == [
        ("use1-az1", "failed", "quota"), ("use1-az2", "skipped", None), ("use1-az6", "skipped", None)]
    assert [(r.state, r.note) for r in groups_journal.groups(store, gang="g-quota")] == [
        ("deleted", "the create was refused")]
    assert cluster.groups() == {}


def test_a_server_error_on_the_create_is_retried_in_place(store: Store, cluster: EksCluster,
                                                          proxy: Ec2FaultProxy) -> None:
    # ServerException (500): "These errors are usually caused by a server-side issue" (EKS API reference).
    proxy.inject(Ec2Fault.error("ServerException", "internal error", 500),
                 action=f"POST /clusters/{cluster.name}/node-groups")
    result = run(store, cluster, "g-retry")
    assert result.ok and result.target is not None and result.target.candidate.zone == "use1-az1"
    assert proxy.log.count(method=f"POST /clusters/{cluster.name}/node-groups") == 2
    assert list(cluster.groups()) == ["g-retry-1"]


def test_a_create_eks_accepted_but_answered_500_is_adopted_once(store: Store, cluster: EksCluster,
                                                               proxy: Ec2FaultProxy) -> None:
    # The group is made, the answer is a 500 anyway: the retry meets ResourceInUseException (409) for the name and
    # adopts the group, which carries this attempt's tag; no second group, no failover.
    create = f"POST /clusters/{cluster.name}/node-groups"
    proxy.inject(Ec2Fault.lost("ServerException", "internal error"), action=create)
    result = run(store, cluster, "g-lost")
    assert (result.state, result.group) == ("ready", "g-lost-1"), result.message
    assert [r.status for r in proxy.log.snapshot() if r.method == create] == [500, 409]
    assert list(cluster.groups()) == ["g-lost-1"]
    assert [(a.zone, a.outcome) for a in journal.attempts(store, "g-lost")] == [("use1-az1", "launched")]
    assert [r.state for r in groups_journal.groups(store, gang="g-lost")] == ["created"]


def test_a_request_eks_rejects_stops_the_run_and_blocks_no_zone(store: Store, cluster: EksCluster,
                                                                proxy: Ec2FaultProxy) -> None:
    # CreateNodegroup InvalidParameterException (400): "The specified parameter is invalid" (EKS API reference):
    # the same request fails in every zone, and the zone is not to blame.
    proxy.inject(Ec2Fault.error("InvalidParameterException", "The role with name eks-gpu-nodes cannot be found."),
                 action=f"POST /clusters/{cluster.name}/node-groups", times="always")
    result = run(store, cluster, "g-bad")
    assert not result.ok and "InvalidParameterException" in result.message
    assert [(a.zone, a.outcome, a.error_kind) for a in journal.attempts(store, "g-bad")] == [
        ("use1-az1", "failed", "request")]
    assert journal.active_blocks(store) == []
