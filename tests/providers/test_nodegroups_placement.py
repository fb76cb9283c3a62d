"""A gang's EKS managed node group in a cluster placement group of its own, on moto's server behind the fault
proxy (real HTTP, real boto3): the placement group and the launch template naming it are made before the group,
the group is created with that template, and every one of the three is gone after a failed zone's rollback, a
refused create, a crash before the group's create, and `down`.

moto (5.2) answers CreateLaunchTemplate, DescribeLaunchTemplates, DescribeLaunchTemplateVersions,
DeleteLaunchTemplate and CreateNodegroup's `launchTemplate` (moto/eks/models.py resolves it against EC2's templates);
placement groups are the fault proxy's (emulators/geosched_emulators/ec2_extras.py: moto has none). AWS shapes: EC2
API reference CreatePlacementGroup, CreateLaunchTemplate (LaunchTemplateData.Placement.GroupName), EKS API reference
CreateNodegroup launchTemplate {id, version}.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from geosched.providers import journal
from geosched.providers.base import Budget
from geosched.providers.gang import plan_gang
from geosched.providers.nodegroups import journal as groups_journal
from geosched.providers.nodegroups import spec
from geosched.providers.nodegroups.eks import Eks
from geosched.providers.nodegroups.launch import GroupSettings, down, provision, read_cluster
from geosched.store.db import Store
from geosched_emulators import Ec2Fault, Ec2FaultProxy, MotoServer
from geosched_emulators.eks_extras import capacity_issue
from tests.providers.eks_support import NODE_ROLE, REGION, ZONES, EksCluster, launch_templates, make_cluster, request
from tests.providers.groups_support import fast
from tests.providers.prov_support import aws_provider

pytestmark = pytest.mark.integration

# EKS User Guide "Customize managed nodes with launch templates" and the API's LaunchTemplateSpecification: a
# template used by a managed node group must not set these (the group's own settings would conflict).
FORBIDDEN = {"IamInstanceProfile", "NetworkInterfaces", "SubnetId", "InstanceMarketOptions", "HibernationOptions",
             "InstanceInitiatedShutdownBehavior"}


@pytest.fixture
def cluster(moto: MotoServer, proxy: Ec2FaultProxy) -> Iterator[EksCluster]:
    yield make_cluster(moto.url)


def run(store: Store, cluster: EksCluster, gang: str, settings: GroupSettings | None = None):  # type: ignore[no-untyped-def]
    eks = Eks(REGION, node_role=NODE_ROLE)
    plan = plan_gang(request(2), {"aws": aws_provider((REGION,))}, store)
    found = read_cluster(eks, cluster.name, settings or fast())
    return provision(plan, found, eks, store, gang=gang, settings=settings or fast())


def left(store: Store, cluster: EksCluster, proxy: Ec2FaultProxy, gang: str) -> dict[str, list[str]]:
    """Everything of the gang the cloud still holds: node groups, launch templates, placement groups."""
    prefix = spec.part_name(journal.owner(store), gang + "-")
    return {"groups": sorted(n for n in cluster.groups() if n.startswith(gang + "-")),
            "templates": sorted(launch_templates(cluster, prefix)),
            "placement groups": sorted(n for n in proxy.placement_groups(REGION) if n.startswith(prefix))}


NOTHING = {"groups": [], "templates": [], "placement groups": []}


def test_the_group_is_created_with_a_template_that_puts_it_in_its_own_cluster_placement_group(
        store: Store, cluster: EksCluster, proxy: Ec2FaultProxy) -> None:
    assert run(store, cluster, "p-pg").ok
    owner = journal.owner(store)
    name = spec.part_name(owner, "p-pg-1")
    assert proxy.placement_groups(REGION)[name] == "cluster"
    template = launch_templates(cluster, name)[name]
    group = cluster.groups()["p-pg-1"]
    assert group["launchTemplate"]["id"] == template["LaunchTemplateId"]
    assert group["launchTemplate"]["version"] == "1"
    data = cluster.ec2.describe_launch_template_versions(
        LaunchTemplateId=template["LaunchTemplateId"])["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    assert data["Placement"] == {"GroupName": name}
    assert not FORBIDDEN & set(data), "a managed node group's template must leave these to the group"
    # The group's own settings are unchanged: its zone's subnet, the plan's instance type, the GPU AMI.
    assert group["subnets"] == [cluster.subnets["use1-az1"]]
    assert group["instanceTypes"] == ["p4d.24xlarge"]
    assert group["amiType"] == spec.AMI_TYPE
    tags = {t["Key"]: t["Value"] for t in template.get("Tags") or []}
    assert tags == {"geosched-gang": "p-pg", "geosched-owner": owner, "geosched-attempt": "p-pg-1"}
    # Both made before the group, in that order (the template names the placement group).
    order = [r.method for r in proxy.log.snapshot() if r.method in (
        "CreatePlacementGroup", "CreateLaunchTemplate", f"POST /clusters/{cluster.name}/node-groups")]
    assert order == ["CreatePlacementGroup", "CreateLaunchTemplate", f"POST /clusters/{cluster.name}/node-groups"]


def test_down_leaves_no_group_template_or_placement_group(store: Store, cluster: EksCluster,
                                                           proxy: Ec2FaultProxy) -> None:
    assert run(store, cluster, "p-down").ok
    assert left(store, cluster, proxy, "p-down") != NOTHING
    result = down(store, "p-down", settings=fast())
    assert (result.state, result.errors) == ("terminated", ())
    assert left(store, cluster, proxy, "p-down") == NOTHING
    assert [r.state for r in groups_journal.groups(store, gang="p-down")] == ["deleted"]


def test_a_failed_zone_loses_its_placement_group_and_template_with_its_group(store: Store, cluster: EksCluster,
                                                                              proxy: Ec2FaultProxy) -> None:
    proxy.nodegroups.set(ZONES["use1-az1"], "CREATE_FAILED", [capacity_issue("p4d.24xlarge", ZONES["use1-az1"])])
    result = run(store, cluster, "p-fail")
    assert result.ok and result.target is not None and result.target.candidate.zone == "use1-az2"
    owner = journal.owner(store)
    # Only the second attempt's: the first zone's three went in its rollback.
    assert left(store, cluster, proxy, "p-fail") == {
        "groups": ["p-fail-2"], "templates": [spec.part_name(owner, "p-fail-2")],
        "placement groups": [spec.part_name(owner, "p-fail-2")]}
    assert down(store, "p-fail", settings=fast()).state == "terminated"
    assert left(store, cluster, proxy, "p-fail") == NOTHING


def test_a_refused_create_deletes_what_was_made_before_it(store: Store, cluster: EksCluster,
                                                           proxy: Ec2FaultProxy) -> None:
    proxy.inject(Ec2Fault.error("InvalidParameterException", "The role with name eks-gpu-nodes cannot be found."),
                 action=f"POST /clusters/{cluster.name}/node-groups", times="always")
    result = run(store, cluster, "p-bad")
    assert not result.ok and "InvalidParameterException" in result.message
    assert proxy.log.count(method="CreatePlacementGroup") >= 1, "the placement group was made before the refusal"
    assert left(store, cluster, proxy, "p-bad") == NOTHING
    assert [(r.state, r.note) for r in groups_journal.groups(store, gang="p-bad")] == [
        ("deleted", "the create was refused")]


def test_a_create_retried_in_place_finds_its_placement_group_and_template(store: Store, cluster: EksCluster,
                                                                          proxy: Ec2FaultProxy) -> None:
    proxy.inject(Ec2Fault.error("ServerException", "internal error", 500),
                 action=f"POST /clusters/{cluster.name}/node-groups")
    assert run(store, cluster, "p-retry").ok
    owner = journal.owner(store)
    assert proxy.log.count(method="CreatePlacementGroup") == 2  # the second answered Duplicate: already ours
    assert left(store, cluster, proxy, "p-retry") == {
        "groups": ["p-retry-1"], "templates": [spec.part_name(owner, "p-retry-1")],
        "placement groups": [spec.part_name(owner, "p-retry-1")]}
    assert down(store, "p-retry", settings=fast()).state == "terminated"
    assert left(store, cluster, proxy, "p-retry") == NOTHING


def test_a_crash_before_the_group_s_create_leaves_nothing_after_down(store: Store, cluster: EksCluster,
                                                                     proxy: Ec2FaultProxy) -> None:
    # What a process killed between CreateLaunchTemplate and CreateNodegroup left: the journal's intent row (written
    # before the first call) and the two parts, no group.
    plan = plan_gang(request(2), {"aws": aws_provider((REGION,))}, store)
    owner = journal.owner(store)
    journal.create_gang(store, "p-crash", owner, plan.request)
    a = journal.start_attempt(store, "p-crash", plan.candidates[0])
    row = groups_journal.intend(store, a, cluster=cluster.name, subnet=cluster.subnets[a.zone],
                                capacity_type="ON_DEMAND", name=f"p-crash-{a.seq}", nodes=2)
    parts = spec.parts(a.instance_type, 2, owner, row.name)
    assert parts is not None
    Eks(REGION)._make_parts(parts, spec.tags("p-crash", owner, a.token), Budget(30.0, 5.0))
    assert left(store, cluster, proxy, "p-crash")["placement groups"] == [parts.name]
    result = down(store, "p-crash", settings=fast())
    assert (result.state, result.errors) == ("terminated", ())
    assert left(store, cluster, proxy, "p-crash") == NOTHING
    assert [r.state for r in groups_journal.groups(store, gang="p-crash")] == ["deleted"]


def test_a_template_of_another_store_is_left_alone(store: Store, cluster: EksCluster, proxy: Ec2FaultProxy) -> None:
    # A row whose group was never made, and a template under its parts' name tagged as another store's (a name
    # collision the owner id in the name makes unlikely; deleting someone else's template is still not ours to do).
    plan = plan_gang(request(2), {"aws": aws_provider((REGION,))}, store)
    owner = journal.owner(store)
    journal.create_gang(store, "p-mine", owner, plan.request)
    a = journal.start_attempt(store, "p-mine", plan.candidates[0])
    row = groups_journal.intend(store, a, cluster=cluster.name, subnet=cluster.subnets[a.zone],
                                capacity_type="ON_DEMAND", name=f"p-mine-{a.seq}", nodes=2)
    name = spec.part_name(owner, row.name)
    made = cluster.ec2.create_launch_template(**spec.launch_template_request(
        spec.Parts(name), spec.tags("p-mine", "o-another-store", a.token)))["LaunchTemplate"]
    assert down(store, "p-mine", settings=fast()).state == "terminated"
    assert list(launch_templates(cluster, name)) == [name]
    cluster.ec2.delete_launch_template(LaunchTemplateId=made["LaunchTemplateId"])
