"""An EKS managed node group on a Capacity Block for ML (`provision --cluster --capacity-block HOURS
--buy-capacity-block`, `up` the same), on moto's EKS and EC2 launch templates behind the fault proxy, whose Capacity
Block double (emulators/geosched_emulators/ec2_extras.py) answers DescribeCapacityBlockOfferings,
PurchaseCapacityBlock and DescribeCapacityReservations, which moto lacks (real HTTP, real boto3).

AWS shapes: EKS User Guide "Create a managed node group with Capacity Blocks for ML" (capacityType CAPACITY_BLOCK, a
launch template with InstanceMarketOptions.MarketType capacity-block, the reservation and the instance type); EC2 API
reference for the three EC2 actions. What is checked: the zone without an offering is failed over without buying,
the block is bought in the next zone that offers one (tagged with the gang, the store's owner and the attempt), the
group runs on it, one block at most per run, nothing is bought without consent, and `down` leaves no group or
template while saying the block stays (EC2 cannot cancel one).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from geosched.core.errors import EXIT_BAD_INPUT
from geosched.providers import journal
from geosched.providers.gang import plan_gang
from geosched.providers.nodegroups import blocks, spec
from geosched.providers.nodegroups import journal as groups_journal
from geosched.providers.nodegroups.backend import Block
from geosched.providers.nodegroups.eks import Eks
from geosched.providers.nodegroups.launch import down, provision, read_cluster
from geosched.store.db import Store
from geosched_emulators import Ec2FaultProxy, MotoServer
from tests.providers.eks_support import NODE_ROLE, REGION, ZONES, EksCluster, launch_templates, make_cluster, request
from tests.providers.groups_support import fast
from tests.providers.prov_support import aws_provider
from tests.providers.test_up_cli import run as run_cli

pytestmark = pytest.mark.integration
TYPE = "p4d.24xlarge"  # the plan's type for A100:8 (eks_support)


@pytest.fixture
def cluster(moto: MotoServer, proxy: Ec2FaultProxy) -> Iterator[EksCluster]:
    yield make_cluster(moto.url)


def run(store: Store, cluster: EksCluster, gang: str, hours: int = 24,  # type: ignore[no-untyped-def]
        call_timeout_s: float = 30.0):
    eks = Eks(REGION, call_timeout_s=call_timeout_s, node_role=NODE_ROLE, capacity_block=spec.CapacityBlock(hours))
    plan = plan_gang(request(2), {"aws": aws_provider((REGION,))}, store)
    found = read_cluster(eks, cluster.name, fast())
    return provision(plan, found, eks, store, gang=gang, settings=fast())


def test_the_zone_without_an_offering_is_failed_over_and_the_next_zones_block_is_bought_and_used(
        store: Store, cluster: EksCluster, proxy: Ec2FaultProxy) -> None:
    # The plan tries use1-az1 (us-east-1b) first: no offering there; use1-az2 (us-east-1c) offers one; an offering
    # of another size or duration elsewhere is no match.
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az2"], TYPE, 2, 24, 1432.80)
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 4, 24, 2865.60)
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 48, 2865.60)
    result = run(store, cluster, "cb-1")
    assert result.ok and result.target is not None, result.message
    assert result.target.candidate.zone == "use1-az2"
    [first, second] = journal.attempts(store, "cb-1")
    assert (first.zone, first.outcome, first.error_code) == ("use1-az1", "failed", "NoCapacityBlockOffering")
    assert "nothing was bought" in (first.message or "")
    # One block bought, the offering of use1-az2, tagged as geosched tags what it makes.
    owner = journal.owner(store)
    [(rid, block)] = proxy.capacity_reservations(REGION).items()
    assert (block["availabilityZone"], block["instanceType"], block["totalInstanceCount"]) == (
        ZONES["use1-az2"], TYPE, 2)
    assert block["tags"] == {"geosched-gang": "cb-1", "geosched-owner": owner, "geosched-attempt": second.token}
    assert proxy.log.count(method="PurchaseCapacityBlock") == 1
    # The group: capacityType CAPACITY_BLOCK, its template targeting the block, in the block's zone.
    group = cluster.groups()["cb-1-2"]
    assert group["capacityType"] == "CAPACITY_BLOCK"
    assert group["subnets"] == [cluster.subnets["use1-az2"]]
    name = spec.part_name(owner, "cb-1-2")
    template = launch_templates(cluster, name)[name]
    assert group["launchTemplate"]["id"] == template["LaunchTemplateId"]
    data = cluster.ec2.describe_launch_template_versions(
        LaunchTemplateId=template["LaunchTemplateId"])["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"] == {"CapacityReservationTarget": {"CapacityReservationId": rid}}
    assert data["InstanceType"] == TYPE
    assert "Placement" not in data and proxy.placement_groups(REGION) == {}  # a block is placed together already
    # The journal says what was bought, and that it cannot be cancelled.
    [row] = [r for r in groups_journal.groups(store, gang="cb-1") if r.name == "cb-1-2"]
    assert row.capacity_type == "CAPACITY_BLOCK"
    assert row.note is not None and rid in row.note and "$1,432.80 paid up front" in row.note
    assert "cannot cancel" in row.note
    # down: the group and its template go; the block stays (EC2 has no way to cancel it).
    result_down = down(store, "cb-1", settings=fast())
    assert (result_down.state, result_down.errors) == ("terminated", ())
    assert [n for n in cluster.groups() if n.startswith("cb-1-")] == []
    assert launch_templates(cluster, spec.part_name(owner, "cb-1-")) == {}
    assert list(proxy.capacity_reservations(REGION)) == [rid]


def test_no_offering_anywhere_buys_nothing_and_creates_nothing(store: Store, cluster: EksCluster,
                                                               proxy: Ec2FaultProxy) -> None:
    result = run(store, cluster, "cb-none")
    assert not result.ok
    assert {a.error_code for a in journal.attempts(store, "cb-none") if a.outcome != "skipped"} == {
        "NoCapacityBlockOffering"}
    assert proxy.log.count(method="PurchaseCapacityBlock") == 0
    assert proxy.capacity_reservations(REGION) == {}
    assert cluster.groups() == {}
    assert [r.state for r in groups_journal.groups(store, gang="cb-none")] == ["deleted"] * 3


def test_a_block_bought_for_a_failed_group_is_not_bought_again_in_the_next_zone(
        store: Store, cluster: EksCluster, proxy: Ec2FaultProxy) -> None:
    from geosched_emulators.eks_extras import capacity_issue

    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, 1432.80)
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az2"], TYPE, 2, 24, 1432.80)
    proxy.nodegroups.set(ZONES["use1-az1"], "CREATE_FAILED", [capacity_issue(TYPE, ZONES["use1-az1"])])
    result = run(store, cluster, "cb-once")
    assert not result.ok and "CapacityBlockBought" in result.message
    assert proxy.log.count(method="PurchaseCapacityBlock") == 1
    assert len(proxy.capacity_reservations(REGION)) == 1
    assert cluster.groups() == {}  # the failed group was deleted, nothing else was made
    assert launch_templates(cluster, spec.part_name(journal.owner(store), "cb-once-")) == {}


@pytest.mark.parametrize(("extra", "says"), [
    ((), "--buy-capacity-block: buying a Capacity Block of 2 nodes for 24 h costs its whole fee up front"),
    (("--buy-capacity-block", "--spot"), "--capacity-block: a Capacity Block is its own market"),
    (("--buy-capacity-block", "--nodes", "3"), "--capacity-block: a Capacity Block holds 1, 2, 4"),
    (("--buy-capacity-block", "--capacity-block", "36"), "--capacity-block: a Capacity Block lasts 1 to 14 days"),
])
def test_what_cannot_be_bought_is_one_line_before_any_call(tmp_path: Path, cluster: EksCluster,
                                                            proxy: Ec2FaultProxy, extra: tuple[str, ...],
                                                            says: str) -> None:
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, 1432.80)
    args = {"--capacity-block": "24", "--nodes": "2"}
    rest = list(extra)
    for flag in ("--nodes", "--capacity-block"):
        if flag in rest:
            i = rest.index(flag)
            args[flag] = rest[i + 1]
            del rest[i:i + 2]
    result = run_cli(tmp_path / "home", "provision", "--cluster", cluster.name, "--region", REGION, "--gpu",
                     "A100:8", "--node-role", NODE_ROLE, "--yes", *[x for kv in args.items() for x in kv], *rest)
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert f"{result.exception}".startswith(says), result.exception
    assert proxy.log.count(method="DescribeCapacityBlockOfferings") == 0
    assert proxy.capacity_reservations(REGION) == {} and cluster.groups() == {}


def test_the_cli_buys_with_consent_and_down_says_the_block_stays(tmp_path: Path, cluster: EksCluster,
                                                                  proxy: Ec2FaultProxy) -> None:
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, 1432.80)
    home = tmp_path / "home"
    dry = run_cli(home, "provision", "--cluster", cluster.name, "--region", REGION, "--gpu", "A100:8", "--nodes", "2",
                  "--capacity-block", "24", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "buy a Capacity Block of 2 x p4d.24xlarge for 24 h" in dry.stderr
    assert proxy.capacity_reservations(REGION) == {}
    made = run_cli(home, "provision", "--cluster", cluster.name, "--region", REGION, "--gpu", "A100:8", "--nodes",
                   "2", "--capacity-block", "24", "--buy-capacity-block", "--node-role", NODE_ROLE, "--yes",
                   "--name", "cb-cli")
    assert made.exit_code == 0, made.output
    [rid] = proxy.capacity_reservations(REGION)
    assert cluster.groups()["cb-cli-1"]["capacityType"] == "CAPACITY_BLOCK"
    shown = run_cli(home, "status", "cb-cli", "-o", "json")
    assert shown.exit_code == 0, shown.output
    [held] = json.loads(shown.stdout)["capacity_blocks"]
    assert (held["reservation"], held["state"], held["upfront_usd"]) == (rid, "bought", 1432.80)
    gone = run_cli(home, "down", "cb-cli", "--yes")
    assert gone.exit_code == 0, gone.output
    assert f"cb-cli: capacity block {rid} (2 x p4d.24xlarge in " in gone.stderr
    assert "paid until its end at" in gone.stderr and "EC2 cannot cancel it" in gone.stderr
    assert cluster.groups() == {}


def test_a_refused_create_after_the_purchase_leaves_no_template_and_the_block_to_its_end(
        store: Store, cluster: EksCluster, proxy: Ec2FaultProxy) -> None:
    from geosched_emulators import Ec2Fault

    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, 1432.80)
    proxy.inject(Ec2Fault.error("InvalidParameterException", "The role with name eks-gpu-nodes cannot be found."),
                 action=f"POST /clusters/{cluster.name}/node-groups", times="always")
    result = run(store, cluster, "cb-bad")
    assert not result.ok and "InvalidParameterException" in result.message
    assert proxy.log.count(method="CreateLaunchTemplate") == 1  # made before the refusal ...
    assert launch_templates(cluster, spec.part_name(journal.owner(store), "cb-bad-")) == {}  # ... and deleted after it
    assert cluster.groups() == {}
    assert len(proxy.capacity_reservations(REGION)) == 1  # bought, tagged with the gang: EC2 cannot cancel it
    assert [r.state for r in groups_journal.groups(store, gang="cb-bad")] == ["deleted"]


def test_up_dry_run_with_a_capacity_block_shows_what_it_would_buy_and_buys_nothing(
        tmp_path: Path, cluster: EksCluster, proxy: Ec2FaultProxy) -> None:
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, 1432.80)
    job = tmp_path / "train.yaml"
    job.write_text("apiVersion: geosched.io/v1alpha1\nkind: Job\nname: train\nimage: ghcr.io/example/train:1\n"
                   "workers: 2\ngpus_per_worker: 8\ngpu: A100\n", encoding="utf-8")
    result = run_cli(tmp_path / "home", "up", str(job), "--cluster", cluster.name, "--region", REGION,
                     "--capacity-block", "48", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "buy a Capacity Block of 2 x p4d.24xlarge for 48 h" in result.stderr
    assert proxy.log.count(method="PurchaseCapacityBlock") == 0 and cluster.groups() == {}
    refused = run_cli(tmp_path / "home", "up", str(job), "--cluster", cluster.name, "--region", REGION,
                      "--capacity-block", "48", "--karpenter")
    assert refused.exit_code == EXIT_BAD_INPUT
    assert str(refused.exception).startswith("--capacity-block: buys capacity for a managed node group")


def test_a_purchase_whose_answer_was_lost_is_not_bought_again_in_the_next_zone(
        store: Store, cluster: EksCluster, proxy: Ec2FaultProxy) -> None:
    from geosched_emulators import Ec2Fault

    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, 1432.80)
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az2"], TYPE, 2, 24, 1432.80)
    # Held past the client's read timeout (3 s), then answered: the block is bought, the answer never read.
    proxy.inject(Ec2Fault.stall(5.0), action="PurchaseCapacityBlock")
    result = run(store, cluster, "cb-lost", call_timeout_s=3.0)
    assert not result.ok and "CapacityBlockBought" in result.message, result.message
    [first, *_] = [a for a in journal.attempts(store, "cb-lost") if a.outcome != "skipped"]
    assert first.error_kind == "stall"
    deadline = time.monotonic() + 10
    while not proxy.capacity_reservations(REGION) and time.monotonic() < deadline:
        time.sleep(0.05)  # real sleep: the held purchase lands in the double on its own time
    [(rid, bought)] = proxy.capacity_reservations(REGION).items()
    assert cluster.groups() == {}
    assert launch_templates(cluster, spec.part_name(journal.owner(store), "cb-lost-")) == {}
    # The journal has the purchase's intent; the block, once found by its tags (no offering id, no fee), completes
    # that row rather than adding one.
    [intent] = blocks.of_gang(store, "cb-lost")
    assert (intent.state, intent.reservation, intent.upfront_usd) == ("buying", None, 1432.80)
    blocks.record(store, first, Block(bought["availabilityZone"], TYPE, 2, None, rid, bought["start"], bought["end"],
                                      None))
    [row] = blocks.of_gang(store, "cb-lost")
    assert (row.state, row.reservation, row.offering, row.upfront_usd) == ("bought", rid, intent.offering, 1432.80)


def test_a_report_charges_the_blocks_fee_spread_over_its_hours(store: Store, cluster: EksCluster,
                                                                proxy: Ec2FaultProxy) -> None:
    """A group on a Capacity Block costs what was paid: the block's upfront fee (journalled with its purchase) over
    its nodes and hours, not the catalog's on-demand price of its type, from the block's start."""
    from geosched.report.report import report

    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, 1432.80)
    result = run(store, cluster, "cb-fee")
    assert result.ok, result.message
    [row] = groups_journal.groups(store, gang="cb-fee")
    [block] = blocks.of_gang(store, "cb-fee")
    # The double's block starts five minutes after the offering is asked for: no node runs before, so the nodes
    # are charged from the block's start, not from the group's create.
    assert block.start_at is not None and block.start_at > row.created_at
    at = block.start_at + 2 * 3600.0  # two hours of the group's two nodes
    doc = json.loads(report(store, "cost", "job", output="json", now=at).text or "{}")
    [line] = [r for r in doc["rows"] if r["job"] == "cb-fee"]
    assert line["priced_from"] == "capacity-block"
    assert line["cost_usd"] == pytest.approx(1432.80 / 2 / 24 * 2 * 2, rel=1e-6)
    down(store, "cb-fee", settings=fast())


def test_a_block_that_starts_later_is_not_bought_and_its_start_is_named(store: Store, cluster: EksCluster,
                                                                          proxy: Ec2FaultProxy) -> None:
    """EC2 sells most blocks from 11:30 UTC on a later day (EC2 User Guide, "Capacity Blocks for ML"): a zone whose
    only block starts in two days is refused naming that start, and nothing is bought anywhere."""
    start = (int(time.time() // 86400) + 2) * 86400 + 11.5 * 3600
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, 1432.80, start=start)
    result = run(store, cluster, "cb-later")
    assert not result.ok
    first = journal.attempts(store, "cb-later")[0]
    assert (first.zone, first.error_code) == ("use1-az1", "NoCapacityBlockOffering")
    named = time.strftime("%Y-%m-%d 11:30 UTC", time.gmtime(start))
    assert f"the zone's earliest starts at {named}" in (first.message or ""), first.message
    assert proxy.log.count(method="PurchaseCapacityBlock") == 0 and proxy.capacity_reservations(REGION) == {}
