"""An EKS managed node group on a Capacity Block that starts later (`--capacity-block-starts-within HOURS`), on
moto's EKS and EC2 Auto Scaling behind the fault proxy, whose Capacity Block double (ec2_extras.py) stands in for the
EC2 actions moto lacks (real HTTP, real boto3).

AWS shapes: EC2 User Guide "Capacity Blocks for ML" (most blocks start at 11:30 UTC on a later day); EKS User Guide
"Create self-managed nodes with Capacity Blocks for ML" (docs.aws.amazon.com/eks/latest/userguide/capacity-blocks.html:
desired 0 until the reservation is active, scale to 0 more than 30 minutes before its end) and "Create a managed node
group with Capacity Blocks for ML" (capacity-blocks-mng.html); EC2 Auto Scaling API reference,
PutScheduledUpdateGroupAction / DescribeScheduledActions; EKS DescribeNodegroup resources.autoScalingGroups. The
scheduled actions are read back from moto's Auto Scaling, not from geosched.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import boto3  # type: ignore[import-untyped]
import pytest

from geosched.providers import journal
from geosched.providers.gang import plan_gang
from geosched.providers.nodegroups import blocks, spec
from geosched.providers.nodegroups import journal as groups_journal
from geosched.providers.nodegroups.eks import Eks
from geosched.providers.nodegroups.launch import down, provision, read_cluster
from geosched.store.db import Store
from geosched_emulators import Ec2Fault, Ec2FaultProxy, MotoServer
from tests.providers.eks_support import NODE_ROLE, REGION, ZONES, EksCluster, launch_templates, make_cluster, request
from tests.providers.groups_support import fast
from tests.providers.prov_support import aws_provider
from tests.providers.test_up_cli import run as run_cli

pytestmark = pytest.mark.integration
TYPE = "p4d.24xlarge"  # the plan's type for A100:8 (eks_support)
FEE = 1432.80


@pytest.fixture
def cluster(moto: MotoServer, proxy: Ec2FaultProxy) -> EksCluster:
    return make_cluster(moto.url)


def autoscaling(moto: MotoServer) -> object:
    """Moto's Auto Scaling, straight (not through geosched), to read back what was put."""
    return boto3.client("autoscaling", region_name=REGION, endpoint_url=moto.url, aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def day_after_tomorrow_1130() -> float:
    """When EC2 starts most Capacity Blocks: 11:30 UTC, here two days on."""
    return (int(time.time() // 86400) + 2) * 86400 + 11.5 * 3600


def templates(cluster: EksCluster, store: Store, gang: str) -> list[str]:
    """The launch templates left of `gang`'s groups."""
    return sorted(launch_templates(cluster, spec.part_name(journal.owner(store), gang + "-")))


def run(store: Store, cluster: EksCluster, gang: str, within_h: float = 72.0):  # type: ignore[no-untyped-def]
    eks = Eks(REGION, node_role=NODE_ROLE, capacity_block=spec.CapacityBlock(24, within_h))
    plan = plan_gang(request(2), {"aws": aws_provider((REGION,))}, store)
    return provision(plan, read_cluster(eks, cluster.name, fast()), eks, store, gang=gang, settings=fast())


def train_job(tmp_path: Path) -> Path:
    """The 2 x 8 A100 job every CLI test here brings up."""
    job = tmp_path / "train.yaml"
    job.write_text("apiVersion: geosched.io/v1alpha1\nkind: Job\nname: train\nimage: ghcr.io/example/train:1\n"
                   "workers: 2\ngpus_per_worker: 8\ngpu: A100\n", encoding="utf-8")
    return job


def actions(moto: MotoServer, owner: str, group: str) -> dict[str, dict]:  # type: ignore[type-arg]
    names = list(spec.action_names(owner, group))
    found = autoscaling(moto).describe_scheduled_actions(ScheduledActionNames=names)  # type: ignore[attr-defined]
    return {a["ScheduledActionName"]: a for a in found["ScheduledUpdateGroupActions"]}


def test_a_later_block_gets_its_group_at_zero_nodes_and_scheduled_scaling_and_down_leaves_nothing(
        store: Store, cluster: EksCluster, proxy: Ec2FaultProxy, moto: MotoServer) -> None:
    start = day_after_tomorrow_1130()
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, FEE, start=start)
    result = run(store, cluster, "cbl-1")
    assert result.ok and result.state == "scheduled", result.message
    assert result.starts_at == pytest.approx(start)
    when = time.strftime("%Y-%m-%d 11:30 UTC", time.gmtime(start))
    assert f"its Capacity Block starts at {when}" in result.message
    # The group: 0 nodes now, room for the gang.
    group = cluster.groups()["cbl-1-1"]
    assert group["capacityType"] == "CAPACITY_BLOCK"
    assert group["scalingConfig"] == {"minSize": 0, "maxSize": 2, "desiredSize": 0}
    # Its Auto Scaling group holds the two actions, as moto's Auto Scaling answers them.
    [asg] = [a["name"] for a in group["resources"]["autoScalingGroups"]]
    owner = journal.owner(store)
    up_name, down_name = spec.action_names(owner, "cbl-1-1")
    found = actions(moto, owner, "cbl-1-1")
    assert set(found) == {up_name, down_name}
    scale_up, scale_in = found[up_name], found[down_name]
    assert scale_up["AutoScalingGroupName"] == scale_in["AutoScalingGroupName"] == asg
    assert scale_up["StartTime"] == datetime.fromtimestamp(start, UTC)
    assert scale_up["DesiredCapacity"] == 2 and "MinSize" not in scale_up and "MaxSize" not in scale_up
    end = start + 24 * 3600
    assert scale_in["StartTime"] == datetime.fromtimestamp(end - 40 * 60, UTC)  # > 30 min before the end
    assert scale_in["DesiredCapacity"] == 0 and "MinSize" not in scale_in
    # The journal: the gang is scheduled, the row says how, the block's dates are kept.
    assert groups_journal.scheduled_start(store, "cbl-1") == pytest.approx(start)
    assert groups_journal.scheduled_start(store, "cbl-1", now=start + 1) is None
    [row] = groups_journal.groups(store, gang="cbl-1")
    assert row.note is not None and "0 nodes until" in row.note and asg in row.note
    [block] = blocks.of_gang(store, "cbl-1")
    assert (block.state, block.start_at, block.end_at) == ("bought", pytest.approx(start), pytest.approx(end))
    # The ledger charges the nodes from the block's start, not from the create.
    starts = [r[0] for r in store.db.execute("SELECT started_at FROM usage WHERE job = 'cbl-1'")]
    assert starts == [pytest.approx(start)] * 2
    # down before the start: the group, its template and its actions go; the block stays (EC2 cannot cancel it).
    assert templates(cluster, store, "cbl-1")  # the filter below finds the gang's template: it can fail
    gone = down(store, "cbl-1", settings=fast())
    assert (gone.state, gone.errors) == ("terminated", ())
    assert cluster.groups() == {}
    assert actions(moto, owner, "cbl-1-1") == {}
    assert templates(cluster, store, "cbl-1") == []
    assert len(proxy.capacity_reservations(REGION)) == 1 and "paid until its end" in gone.blocks[0]
    # Deleted before the start: no node-hour was held (the fee itself is paid at purchase: `down` said so).
    assert [r[0] for r in store.db.execute("SELECT ended_at - started_at FROM usage WHERE job = 'cbl-1'")] == [0, 0]


def test_a_create_retried_after_eks_accepted_it_adopts_the_group_and_schedules_it(
        store: Store, cluster: EksCluster, proxy: Ec2FaultProxy, moto: MotoServer) -> None:
    """CreateNodegroup reaches moto, which makes the group, but the answer is a ServerException (500): the retry
    in place is answered ResourceInUseException (moto's, as EKS's for a name taken), the group is adopted as this
    attempt's (its tag) and, standing at 0 nodes ahead of its block, gets its two scheduled actions like a group
    the first try made. Without them its nodes would never come up."""
    start = day_after_tomorrow_1130()
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, FEE, start=start)
    create = f"POST /clusters/{cluster.name}/node-groups"
    proxy.inject(Ec2Fault.lost("ServerException", "internal error"), action=create)
    result = run(store, cluster, "cbl-lost")
    assert (result.state, result.group) == ("scheduled", "cbl-lost-1"), result.message
    calls = [(r.status, r.injected) for r in proxy.log.snapshot() if r.method == create]
    assert calls == [(500, True), (409, False)]  # the accepted try, then EKS's "name in use" for the retry
    assert list(cluster.groups()) == ["cbl-lost-1"]
    assert cluster.groups()["cbl-lost-1"]["scalingConfig"]["desiredSize"] == 0
    owner = journal.owner(store)
    found = actions(moto, owner, "cbl-lost-1")
    up_name, down_name = spec.action_names(owner, "cbl-lost-1")
    assert found[up_name]["StartTime"] == datetime.fromtimestamp(start, UTC)
    assert found[up_name]["DesiredCapacity"] == 2
    assert found[down_name]["StartTime"] == datetime.fromtimestamp(start + 24 * 3600 - 40 * 60, UTC)
    [row] = groups_journal.groups(store, gang="cbl-lost")
    assert row.state == "created" and row.note is not None
    assert row.note.startswith("capacity block ") and "0 nodes until" in row.note  # the block's note kept
    assert groups_journal.scheduled_start(store, "cbl-lost") == pytest.approx(start)
    assert proxy.log.count(method="PurchaseCapacityBlock") == 1  # the retry found the block it bought by its tags
    gone = down(store, "cbl-lost", settings=fast())
    assert (gone.state, gone.errors) == ("terminated", ())
    assert cluster.groups() == {} and actions(moto, owner, "cbl-lost-1") == {}
    assert templates(cluster, store, "cbl-lost") == []


def test_a_later_block_is_refused_unless_its_start_is_allowed(store: Store, cluster: EksCluster,
                                                              proxy: Ec2FaultProxy) -> None:
    start = day_after_tomorrow_1130()
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, FEE, start=start)
    result = run(store, cluster, "cbl-short", within_h=(start - time.time()) / 3600 - 1)
    assert not result.ok
    first = journal.attempts(store, "cbl-short")[0]
    assert first.error_code == "NoCapacityBlockOffering"
    assert "later than --capacity-block-starts-within allows" in (first.message or "")
    assert proxy.capacity_reservations(REGION) == {} and cluster.groups() == {}


def test_a_scheduling_refused_deletes_the_group_and_buys_no_second_block(
        store: Store, cluster: EksCluster, proxy: Ec2FaultProxy, moto: MotoServer) -> None:
    start = day_after_tomorrow_1130()
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, FEE, start=start)
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az2"], TYPE, 2, 24, FEE, start=start)
    proxy.inject(Ec2Fault.error("AccessDenied", "User is not authorized to perform: "
                                "autoscaling:PutScheduledUpdateGroupAction", http_status=403),
                 action="PutScheduledUpdateGroupAction", times="always")
    result = run(store, cluster, "cbl-denied")
    assert not result.ok
    [first, *_] = [a for a in journal.attempts(store, "cbl-denied") if a.outcome != "skipped"]
    assert (first.outcome, first.error_code) == ("rolled-back", "AccessDenied"), first
    assert cluster.groups() == {}
    assert templates(cluster, store, "cbl-denied") == []
    assert actions(moto, journal.owner(store), "cbl-denied-1") == {}
    assert proxy.log.count(method="PurchaseCapacityBlock") == 1  # the block is not refunded: no second one
    assert [r.state for r in groups_journal.groups(store, gang="cbl-denied")] == ["deleted"]


def test_the_cli_schedules_the_gang_says_when_and_status_and_down_follow(
        tmp_path: Path, cluster: EksCluster, proxy: Ec2FaultProxy, moto: MotoServer) -> None:
    start = day_after_tomorrow_1130()
    offering = proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, FEE, start=start)
    home = tmp_path / "home"
    common = ("provision", "--cluster", cluster.name, "--region", REGION, "--gpu", "A100:8", "--nodes", "2",
              "--capacity-block", "24", "--capacity-block-starts-within", "72")
    dry = run_cli(home, *common, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "starts within 72 h" in dry.stderr and "0 nodes until its start" in dry.stderr
    # The offerings are read (not bought): per zone of the plan, the block's start and what it costs per hour.
    when = time.strftime("%Y-%m-%d 11:30 UTC", time.gmtime(start))
    assert (f"use1-az1 (us-east-1b): would buy {offering}, starting at {when} ($1,432.80 "
            "up front for 24 h: $59.70/h for the 2 nodes, $29.85 per node-hour); the node group waits at 0 nodes "
            "until then") in dry.stderr, dry.stderr
    assert "use1-az2 (us-east-1c): no Capacity Block of this type and size offered in the next 8 weeks" in dry.stderr
    assert proxy.capacity_reservations(REGION) == {} and cluster.groups() == {}
    made = run_cli(home, *common, "--buy-capacity-block", "--node-role", NODE_ROLE, "--yes", "--name", "cbl-cli")
    assert made.exit_code == 0, made.output
    assert f"starts at {when}" in made.stderr
    shown = run_cli(home, "status", "cbl-cli", "-o", "json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["state"] == f"scheduled, starts at {when}"
    listed = run_cli(home, "status", "-o", "json")
    assert [g["state"] for g in json.loads(listed.stdout)["items"]] == ["scheduled"], listed.stdout
    gone = run_cli(home, "down", "cbl-cli", "--yes")
    assert gone.exit_code == 0, gone.output
    assert cluster.groups() == {} and actions(moto, journal_owner(home), "cbl-cli-1") == {}


def journal_owner(home: Path) -> str:
    with Store(home) as s:
        return journal.owner(s)


def test_up_on_a_later_block_returns_once_scheduled_and_submits_nothing(
        tmp_path: Path, cluster: EksCluster, proxy: Ec2FaultProxy, moto: MotoServer) -> None:
    """`up` does not block until the block starts: it returns once the group is ACTIVE at 0 nodes with its
    actions set, says when the nodes come up and how to place the job then; no cluster is asked (none is given)."""
    start = day_after_tomorrow_1130()
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, FEE, start=start)
    job = train_job(tmp_path)
    home = tmp_path / "home"
    result = run_cli(home, "up", str(job), "--cluster", cluster.name, "--region", REGION, "--node-role", NODE_ROLE,
                     "--capacity-block", "24", "--capacity-block-starts-within", "72", "--buy-capacity-block",
                     "--yes", "--name", "cbl-up")
    assert result.exit_code == 0, result.output
    when = time.strftime("%Y-%m-%d 11:30 UTC", time.gmtime(start))
    assert f"its Capacity Block starts at {when}" in result.stderr
    assert "train is not submitted: run `geosched submit" in result.stderr
    assert cluster.groups()["cbl-up-1"]["scalingConfig"]["desiredSize"] == 0
    assert len(actions(moto, journal_owner(home), "cbl-up-1")) == 2
    # The ledger's rows are the job's, charged from the block's start.
    with Store(home) as s:
        rows = list(s.db.execute("SELECT job, started_at FROM usage WHERE cluster IS NOT NULL"))
    assert rows == [("train", pytest.approx(start))] * 2
    assert run_cli(home, "down", "cbl-up", "--yes").exit_code == 0
    assert cluster.groups() == {} and actions(moto, journal_owner(home), "cbl-up-1") == {}


def test_a_dry_run_whose_offerings_cannot_be_read_says_so_and_shows_the_plan(
        tmp_path: Path, cluster: EksCluster, proxy: Ec2FaultProxy) -> None:
    proxy.inject(Ec2Fault.error("UnauthorizedOperation", "You are not authorized to perform this operation.",
                                http_status=403), action="DescribeCapacityBlockOfferings", times="always")
    dry = run_cli(tmp_path / "home", "provision", "--cluster", cluster.name, "--region", REGION, "--gpu", "A100:8",
                  "--nodes", "2", "--capacity-block", "24", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert f"Capacity Block offerings of cluster {cluster.name} not read: auth: " in dry.stderr, dry.stderr
    assert "use1-az1" in dry.stdout  # the plan itself stands


def group_nodes_register(kube: object, group: str, nodes: int) -> None:
    """What the scale-up at the block's start brings: the group's instances booted and their kubelets registered,
    Ready, with the label EKS gives a managed node group's nodes (eks.amazonaws.com/nodegroup)."""
    from tests.kubeemu import node_manifest

    for i in range(nodes):
        kube.create(node_manifest(  # type: ignore[attr-defined]
            f"ip-10-40-0-{10 + i}.ec2.internal", region=REGION, zone=ZONES["use1-az1"], instance_type=TYPE,
            gpu_product="NVIDIA-A100-SXM4-40GB", gpus=8,
            labels={"eks.amazonaws.com/nodegroup": group}))


@pytest.mark.parametrize("nodes_come", [True, False])
def test_waiting_for_the_block_joins_its_nodes_at_the_start(
        tmp_path: Path, store: Store, cluster: EksCluster, proxy: Ec2FaultProxy, moto: MotoServer,
        nodes_come: bool) -> None:
    """`up --wait-for-block`: the actions are set first; the run then waits until the block's start (`until`, here
    not sleeping: it registers the group's nodes in the emulated cluster as the scale-up would), then for the nodes
    to be Ready (the same join as `up`, against the project's Kubernetes API emulator over HTTP). Nodes that never
    come are the zone's NotJoined: the group is deleted, and no second block is bought."""
    from geosched.cli.up import _Joiner
    from geosched.providers.nodegroups.launch import provision_across
    from geosched.providers.nodegroups.sites import site
    from tests.kubeemu import MultiCluster

    start = day_after_tomorrow_1130()
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, FEE, start=start)
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az2"], TYPE, 2, 24, FEE, start=start)
    (tmp_path / "kube").mkdir()
    with MultiCluster(1, names=[cluster.name], directory=tmp_path / "kube") as mc:
        asked: list[tuple[float, int]] = []

        def until(at: float) -> None:
            asked.append((at, len(actions(moto, journal.owner(store), "cbl-wait-1"))))
            if nodes_come:
                group_nodes_register(mc[cluster.name], "cbl-wait-1", 2)

        eks = Eks(REGION, node_role=NODE_ROLE, capacity_block=spec.CapacityBlock(24, 72.0))
        plan = plan_gang(request(2), {"aws": aws_provider((REGION,))}, store)
        place = site(plan, eks, read_cluster(eks, cluster.name, fast()))
        result = provision_across(plan, (place,), store, gang="cbl-wait", settings=fast(),
                                  join=_Joiner({}, mc.kubeconfig, 1.0), until=until)
    assert asked == [(pytest.approx(start), 2)]  # waited for the block's start, its two actions already set
    if nodes_come:
        assert (result.state, result.group) == ("ready", "cbl-wait-1"), result.message
        assert result.message.endswith("its 2 nodes Ready")
        assert down(store, "cbl-wait", settings=fast()).errors == ()
    else:
        assert not result.ok
        [first, second] = [a for a in journal.attempts(store, "cbl-wait") if a.outcome != "skipped"][:2]
        assert (first.outcome, first.error_code) == ("rolled-back", "NodesNotReady")
        assert second.error_code == "CapacityBlockBought"
        assert proxy.log.count(method="PurchaseCapacityBlock") == 1
    assert cluster.groups() == {}
    assert actions(moto, journal.owner(store), "cbl-wait-1") == {}


def test_up_wait_for_block_sleeps_until_the_start_then_joins(tmp_path: Path, cluster: EksCluster,
                                                             proxy: Ec2FaultProxy, moto: MotoServer,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The flag's wiring: `up --wait-for-block` waits (its sleeper replaced, so no day passes) for the block's start
    and then joins; here no node comes, so the zone fails as any group whose nodes never joined and nothing is
    left. Without the flag the same `up` returns at once, scheduled (test above)."""
    from geosched.cli import up as up_cli
    from geosched.core.errors import EXIT_BAD_INPUT, EXIT_NO_FIT
    from tests.kubeemu import MultiCluster

    start = day_after_tomorrow_1130()
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, FEE, start=start)
    slept: list[float] = []
    monkeypatch.setattr(up_cli, "sleep_until", slept.append)
    job = train_job(tmp_path)
    (tmp_path / "kube").mkdir()
    home = tmp_path / "home"
    with MultiCluster(1, names=[cluster.name], directory=tmp_path / "kube") as mc:
        result = run_cli(home, "up", str(job), "--cluster", cluster.name, "--region", REGION, "--node-role",
                         NODE_ROLE, "--kubeconfig", str(mc.kubeconfig), "--capacity-block", "24",
                         "--capacity-block-starts-within", "72", "--buy-capacity-block", "--wait-for-block",
                         "--join-timeout", "1", "--yes", "--name", "cbl-slept")
    assert result.exit_code == EXIT_NO_FIT, result.output
    assert slept == [pytest.approx(start)]
    assert "0 of 2 nodes of node group cbl-slept-1" in result.output, result.output
    assert cluster.groups() == {} and actions(moto, journal_owner(home), "cbl-slept-1") == {}
    refused = run_cli(home, "up", str(job), "--cluster", cluster.name, "--region", REGION, "--wait-for-block")
    assert refused.exit_code == EXIT_BAD_INPUT
    assert str(refused.exception).startswith("--wait-for-block: waits for the start of the Capacity Block")


def test_ctrl_c_while_waiting_for_the_block_leaves_the_group_scheduled_and_says_so(
        tmp_path: Path, cluster: EksCluster, proxy: Ec2FaultProxy, moto: MotoServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C during `--wait-for-block` stops the wait, not the gang: the group stays on its paid block, scheduled,
    as `up` without the wait leaves it. It ended in click's "Aborted" before, the attempt `started` and the gang
    `provisioning` for ever; deleting the group instead would make a re-run buy a second block."""
    from geosched.cli import up as up_cli

    start = day_after_tomorrow_1130()
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, FEE, start=start)

    def interrupted(at: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(up_cli, "sleep_until", interrupted)
    job = train_job(tmp_path)
    home = tmp_path / "home"
    result = run_cli(home, "up", str(job), "--cluster", cluster.name, "--region", REGION, "--node-role", NODE_ROLE,
                     "--kubeconfig", str(tmp_path / "unused"), "--capacity-block", "24",
                     "--capacity-block-starts-within", "72", "--buy-capacity-block", "--wait-for-block", "--yes",
                     "--name", "cbl-stop")
    assert result.exit_code == 0, result.output
    assert "interrupted while waiting: node group cbl-stop-1 stays scheduled on its Capacity Block" in result.output
    assert "train is not submitted" in result.output and "geosched down cbl-stop" in result.output
    assert list(cluster.groups()) == ["cbl-stop-1"]
    assert len(actions(moto, journal_owner(home), "cbl-stop-1")) == 2
    assert proxy.log.count(method="PurchaseCapacityBlock") == 1
    with Store(home) as store:
        assert journal.gang_record(store, "cbl-stop").state == "ready"  # type: ignore[union-attr]
        assert [a.outcome for a in journal.attempts(store, "cbl-stop") if a.outcome != "skipped"] == ["launched"]
        assert down(store, "cbl-stop", settings=fast()).errors == ()
    assert cluster.groups() == {}


def test_down_without_the_right_to_read_scheduled_actions_still_deletes_a_blocks_group(
        store: Store, cluster: EksCluster, proxy: Ec2FaultProxy) -> None:
    """A group on a block that started within the hour never had actions, and AWS deletes a later block's with its
    Auto Scaling group: a role without autoscaling:DescribeScheduledActions must not keep `down` from finishing."""
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, FEE)  # starts in five minutes
    assert run(store, cluster, "cbl-now", within_h=1.0).state == "ready"
    looked = proxy.inject(Ec2Fault.error("AccessDenied", "User is not authorized to perform: "
                                         "autoscaling:DescribeScheduledActions", http_status=403),
                          action="DescribeScheduledActions", times="always")
    assert templates(cluster, store, "cbl-now")
    gone = down(store, "cbl-now", settings=fast())
    assert (gone.state, gone.errors) == ("terminated", ())
    assert looked.hits == 1 and cluster.groups() == {}
    assert templates(cluster, store, "cbl-now") == []


def test_up_again_with_the_gangs_name_waits_for_the_block_and_places_the_job(
        tmp_path: Path, cluster: EksCluster, proxy: Ec2FaultProxy, moto: MotoServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The first `up` ends scheduled; the same `up` with the gang's name picks the gang up (as `sky launch -c NAME`
    reuses a cluster): it puts the scheduled actions again (here the first run's are gone, as when a process dies
    between the group's ACTIVE and the put), waits for the block's start (the sleeper replaced: it registers the
    group's nodes in the project's Kubernetes API emulator, as the scale-up would), joins the nodes and submits
    the job onto them. It creates and buys nothing; a different request under the name is refused in one line."""
    from geosched.cli import up as up_cli
    from geosched.core.errors import EXIT_BAD_INPUT
    from tests.kubeemu import MultiCluster

    start = day_after_tomorrow_1130()
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, FEE, start=start)
    job = train_job(tmp_path)
    home = tmp_path / "home"
    again = ("up", str(job), "--cluster", cluster.name, "--region", REGION, "--name", "cbl-again")
    first = run_cli(home, *again, "--node-role", NODE_ROLE, "--capacity-block", "24",
                    "--capacity-block-starts-within", "72", "--buy-capacity-block", "--yes")
    assert first.exit_code == 0, first.output
    assert "or this `up` again with --name cbl-again (it waits for the start" in first.stderr
    owner = journal_owner(home)
    [asg] = [a["name"] for a in cluster.groups()["cbl-again-1"]["resources"]["autoScalingGroups"]]
    for name in spec.action_names(owner, "cbl-again-1"):
        autoscaling(moto).delete_scheduled_action(  # type: ignore[attr-defined]
            AutoScalingGroupName=asg, ScheduledActionName=name)
    assert actions(moto, owner, "cbl-again-1") == {}
    bigger = tmp_path / "bigger.yaml"
    bigger.write_text(job.read_text(encoding="utf-8").replace("workers: 2", "workers: 3"), encoding="utf-8")
    refused = run_cli(home, "up", str(bigger), "--cluster", cluster.name, "--region", REGION, "--name", "cbl-again")
    assert refused.exit_code == EXIT_BAD_INPUT, refused.output
    assert str(refused.exception) == ("--name: gang cbl-again was made for 2 x A100:8 (on-demand), not 3 x A100:8 "
                                      "(on-demand): its name is taken; choose another --name")
    dry = run_cli(home, *again, "--dry-run")
    assert dry.exit_code == 0, dry.output
    when = time.strftime("%Y-%m-%d 11:30 UTC", time.gmtime(start))
    assert f"wait until its Capacity Block starts at {when}, then wait for the 2 nodes" in dry.stderr
    asked = len(proxy.log.snapshot())
    (tmp_path / "kube").mkdir()
    with MultiCluster(1, names=[cluster.name], directory=tmp_path / "kube") as mc:
        slept: list[tuple[float, int]] = []

        def until(at: float) -> None:
            slept.append((at, len(actions(moto, owner, "cbl-again-1"))))
            group_nodes_register(mc[cluster.name], "cbl-again-1", 2)

        monkeypatch.setattr(up_cli, "sleep_until", until)
        placed = run_cli(home, *again, "--kubeconfig", str(mc.kubeconfig), "--join-timeout", "30", "-v")
    assert placed.exit_code == 0, placed.output
    assert "(scheduled action on Auto Scaling group" in placed.stderr  # -v shows what the pick-up did too
    assert slept == [(pytest.approx(start), 2)]  # the actions were put again before the wait
    assert "gang cbl-again: node group cbl-again-1 runs train" in placed.stderr
    made = [r.method for r in proxy.log.snapshot()[asked:]]
    assert not [m for m in made if m.startswith("POST /clusters/") or m == "PurchaseCapacityBlock"], made
    assert list(cluster.groups()) == ["cbl-again-1"]
    assert run_cli(home, "down", "cbl-again", "--yes").exit_code == 0
    assert cluster.groups() == {} and actions(moto, owner, "cbl-again-1") == {}
    gone = run_cli(home, *again)
    assert gone.exit_code == EXIT_BAD_INPUT
    assert str(gone.exception) == "--name: gang cbl-again is terminated: its name is taken; choose another --name"


def test_a_picked_up_gang_whose_nodes_never_come_is_left_standing(store: Store, cluster: EksCluster,
                                                                  proxy: Ec2FaultProxy, moto: MotoServer) -> None:
    """The re-run made nothing, so it deletes nothing: nodes that never join after the block's start fail the run
    and leave the group (and its actions) to `down`."""
    from geosched.providers.nodegroups.backend import NotJoined
    from geosched.providers.nodegroups.launch import NewGroup
    from geosched.providers.nodegroups.resume import resume

    start = day_after_tomorrow_1130()
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], TYPE, 2, 24, FEE, start=start)
    assert run(store, cluster, "cbl-nj").state == "scheduled"
    waited: list[float] = []
    joined: list[NewGroup] = []

    def never(new: NewGroup) -> None:
        joined.append(new)
        raise NotJoined(f"0 of 2 nodes of node group {new.name} (cluster {new.cluster}) Ready after 1 s")

    result = resume(store, "cbl-nj", Eks(REGION), settings=fast(), join=never, until=waited.append)
    assert waited == [pytest.approx(start)]
    assert [(n.name, n.nodes, n.zone) for n in joined] == [("cbl-nj-1", 2, "use1-az1")]
    assert result.state == "failed"
    assert result.message.endswith("nothing was deleted: `geosched down cbl-nj` deletes the node group")
    assert list(cluster.groups()) == ["cbl-nj-1"] and len(actions(moto, journal.owner(store), "cbl-nj-1")) == 2
    assert down(store, "cbl-nj", settings=fast()).errors == ()
    assert cluster.groups() == {}
