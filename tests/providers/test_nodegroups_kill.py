"""A provisioning process killed with SIGKILL while it makes a node group leaves a journal that `down` cleans
fully: no node group of the gang is left in the cluster and no journal row stays open, nor any usage ledger interval
(one is open only while its group exists: the ledger is written in the journal's transactions).

Three moments: while the process waits for a created group to become ACTIVE (the proxy keeps answering CREATING:
moto makes every group ACTIVE at once, eks_extras.py); while its CreateNodegroup request is held by the server
(the proxy stalls it, then forwards it to moto: the group appears after the process died, and `down` finds it
through the intent row, waiting for the intent to settle); and while the DeleteNodegroup of a group that failed
for capacity is held (the row says `deleting`); and, a p4d gang's group being made in a cluster placement group
of its own, while the CreateLaunchTemplate after its CreatePlacementGroup is held (nothing but the intent row and
the placement group exist). After each, `down` leaves no placement group or launch template of the gang either.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from geosched.core.retry import RetryPolicy
from geosched.providers import journal
from geosched.providers.gang import plan_gang
from geosched.providers.nodegroups import blocks, spec
from geosched.providers.nodegroups import journal as groups_journal
from geosched.providers.nodegroups.eks import Eks
from geosched.providers.nodegroups.launch import GroupSettings, down, provision, read_cluster
from geosched.report.ledger import ledger_intervals
from geosched.store.db import Store
from geosched_emulators import Ec2Fault, Ec2FaultProxy, MotoServer
from geosched_emulators.eks_extras import capacity_issue
from tests.providers.eks_support import NODE_ROLE, REGION, ZONES, EksCluster, make_cluster, request
from tests.providers.prov_support import aws_env, aws_provider

pytestmark = pytest.mark.integration

SETTLE_S = 8.0


def settings() -> GroupSettings:
    return GroupSettings(poll_s=0.05, call_timeout_s=10.0, settle_s=SETTLE_S,
                         retry=RetryPolicy(attempts=3, initial_s=0.02, max_s=0.1))


def child(home: str, env: dict[str, str], cluster: str, gang: str, block_hours: int | None = None,
          within_h: float = 1.0) -> None:
    """The provisioning process: what `geosched provision --cluster` runs, in a process of its own (with
    `--capacity-block block_hours --capacity-block-starts-within within_h --buy-capacity-block` when given)."""
    os.environ.update(env)
    with Store(Path(home)) as store:
        block = spec.CapacityBlock(block_hours, within_h) if block_hours is not None else None
        eks = Eks(REGION, node_role=NODE_ROLE, capacity_block=block)
        plan = plan_gang(request(2), {"aws": aws_provider((REGION,))}, store)
        provision(plan, read_cluster(eks, cluster, settings()), eks, store, gang=gang,
                  settings=settings())


def row_in(home: Path, gang: str, state: str) -> Callable[[], bool]:
    def seen() -> bool:
        with Store(home) as store:
            return any(r.state == state for r in groups_journal.groups(store, gang=gang))
    return seen


def kill_when(home: Path, proxy: Ec2FaultProxy, cluster: EksCluster, gang: str, ready: Callable[[], bool],
              limit_s: float = 60.0, block_hours: int | None = None, within_h: float = 1.0) -> None:
    """Run the provisioning process and SIGKILL it as soon as `ready()` holds."""
    proc: Any = multiprocessing.get_context("spawn").Process(
        target=child, args=(str(home), aws_env(proxy.url), cluster.name, gang, block_hours, within_h))
    proc.start()
    try:
        deadline = time.monotonic() + limit_s
        while not ready():
            assert time.monotonic() < deadline, f"the moment to kill {gang} never came"
            assert proc.is_alive(), "the child ended before the moment to kill it"
            time.sleep(0.01)  # real sleep: polling a real child process and the proxy in front of moto
    finally:
        proc.kill()  # SIGKILL, this child only
        proc.join(10.0)
    assert proc.exitcode == -9, "the child must die by the kill, not finish"


def charged(home: Path, gang: str) -> list[tuple[str, bool]]:
    """(node, still open) of each ledger interval of the gang."""
    with Store(home) as store:
        return sorted((i.name, i.end is None) for i in ledger_intervals(store) if i.job == gang)


def assert_clean(home: Path, cluster: EksCluster, gang: str, proxy: Ec2FaultProxy) -> None:
    with Store(home) as store:
        prefix = spec.part_name(journal.owner(store), gang + "-")
        result = down(store, gang, settings=settings())
        assert (result.state, result.errors) == ("terminated", ())
        assert groups_journal.groups(store, gang=gang, states=groups_journal.OPEN_STATES) == []
        assert [i for i in ledger_intervals(store) if i.job == gang and i.end is None] == [], "charged past down"
        assert journal.gang_record(store, gang).state == "terminated"  # type: ignore[union-attr]
    assert cluster.groups() == {}, "down must leave no node group of the gang"
    # Nor the cluster placement groups and launch templates the gang's groups were made with.
    assert [n for n in proxy.placement_groups(REGION) if n.startswith(prefix)] == []
    assert [t["LaunchTemplateName"] for t in cluster.ec2.describe_launch_templates()["LaunchTemplates"]
            if t["LaunchTemplateName"].startswith(prefix)] == []


@pytest.fixture
def cluster(moto: MotoServer, proxy: Ec2FaultProxy) -> EksCluster:
    return make_cluster(moto.url)


def test_killed_while_waiting_for_active(tmp_path: Path, proxy: Ec2FaultProxy, cluster: EksCluster) -> None:
    for zone in ZONES.values():
        proxy.nodegroups.set(zone, "CREATING")
    home = tmp_path / "home"
    kill_when(home, proxy, cluster, "k-wait", row_in(home, "k-wait", "created"))
    assert list(cluster.groups()) == ["k-wait-1"], "the killed process left its group behind"
    assert charged(home, "k-wait") == [("k-wait-1#0", True), ("k-wait-1#1", True)], "the group exists: charged"
    proxy.nodegroups.clear()
    assert_clean(home, cluster, "k-wait", proxy)
    assert charged(home, "k-wait") == [("k-wait-1#0", False), ("k-wait-1#1", False)]


def test_killed_while_the_create_is_held_by_the_server(tmp_path: Path, proxy: Ec2FaultProxy,
                                                       cluster: EksCluster) -> None:
    # Held for less than the settle time, so the group lands while `down` still looks for it.
    create = f"POST /clusters/{cluster.name}/node-groups"
    held = proxy.inject(Ec2Fault.stall(4.0), action=create)
    home = tmp_path / "home"
    kill_when(home, proxy, cluster, "k-held", lambda: held.hits > 0)  # the server holds the create now
    assert cluster.groups() == {}, "killed before the held create reached moto"
    assert charged(home, "k-held") == [], "no group yet, so no interval: only the intent is journalled"
    assert_clean(home, cluster, "k-held", proxy)
    # The held create has reached moto by now (the proxy logs a call once moto answered it): nothing it made is left.
    deadline = time.monotonic() + 30.0
    while proxy.log.count(method=create) == 0 and time.monotonic() < deadline:
        time.sleep(0.02)  # real sleep: the proxy forwards the held create to the real moto server on its own time
    assert proxy.log.count(method=create, status=200) == 1
    assert cluster.groups() == {}, "the group the held create made after the kill must be gone"


def test_killed_while_rolling_back_a_failed_group(tmp_path: Path, proxy: Ec2FaultProxy, cluster: EksCluster) -> None:
    # The first zone's group ends CREATE_FAILED for capacity; its DeleteNodegroup is held by the server when the
    # process dies, so the journal says `deleting` and the group may or may not be gone yet.
    zone = ZONES["use1-az1"]
    proxy.nodegroups.set(zone, "CREATE_FAILED", [capacity_issue("p4d.24xlarge", zone)])
    held = proxy.inject(Ec2Fault.stall(4.0), action=f"DELETE /clusters/{cluster.name}/node-groups/k-back-1")
    home = tmp_path / "home"
    kill_when(home, proxy, cluster, "k-back", lambda: held.hits > 0)
    with Store(home) as store:
        assert [r.state for r in groups_journal.groups(store, gang="k-back")] == ["deleting"]
    assert charged(home, "k-back") == [("k-back-1#0", True), ("k-back-1#1", True)], "deleting: still billed"
    assert_clean(home, cluster, "k-back", proxy)


def test_killed_between_the_placement_group_and_the_group(tmp_path: Path, proxy: Ec2FaultProxy,
                                                          cluster: EksCluster) -> None:
    held = proxy.inject(Ec2Fault.stall(4.0), action="CreateLaunchTemplate")
    home = tmp_path / "home"
    kill_when(home, proxy, cluster, "k-parts", lambda: held.hits > 0)
    with Store(home) as store:
        assert [r.state for r in groups_journal.groups(store, gang="k-parts")] == ["intent"]
        name = spec.part_name(journal.owner(store), "k-parts-1")
    assert name in proxy.placement_groups(REGION), "the placement group is made before the template"
    assert cluster.groups() == {}
    assert_clean(home, cluster, "k-parts", proxy)


def test_killed_after_buying_a_capacity_block_while_the_create_is_held(tmp_path: Path, proxy: Ec2FaultProxy,
                                                                       cluster: EksCluster) -> None:
    """A group on a Capacity Block: the process dies after PurchaseCapacityBlock and CreateLaunchTemplate, its
    CreateNodegroup held by the server. `down` deletes the group the held create makes and the template; the block
    stays (EC2 cannot cancel it), tagged with the gang and attempt that bought it."""
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], "p4d.24xlarge", 2, 24, 1432.80)
    create = f"POST /clusters/{cluster.name}/node-groups"
    held = proxy.inject(Ec2Fault.stall(4.0), action=create)
    home = tmp_path / "home"
    kill_when(home, proxy, cluster, "k-block", lambda: held.hits > 0, block_hours=24)
    [block] = proxy.capacity_reservations(REGION).values()
    assert (block["tags"]["geosched-gang"], block["tags"]["geosched-attempt"]) == ("k-block", "k-block-1")
    assert proxy.log.count(method="CreateLaunchTemplate") == 1
    assert_clean(home, cluster, "k-block", proxy)
    deadline = time.monotonic() + 30.0
    while proxy.log.count(method=create) == 0 and time.monotonic() < deadline:
        time.sleep(0.02)  # real sleep: the proxy forwards the held create to the real moto server on its own time
    assert cluster.groups() == {}, "the group the held create made after the kill must be gone"
    assert len(proxy.capacity_reservations(REGION)) == 1, "one block bought, never a second"


def test_killed_after_the_purchase_answer_names_the_block(tmp_path: Path, proxy: Ec2FaultProxy,
                                                          cluster: EksCluster) -> None:
    """The process dies after PurchaseCapacityBlock answered, before the node group call (its CreateLaunchTemplate
    held): the store already names the block bought (journalled before the purchase, completed from its answer),
    so `down` says it exists and is paid until its end, and deletes nothing it did not make."""
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], "p4d.24xlarge", 2, 24, 1432.80)
    held = proxy.inject(Ec2Fault.stall(4.0), action="CreateLaunchTemplate")
    home = tmp_path / "home"
    kill_when(home, proxy, cluster, "k-paid", lambda: held.hits > 0, block_hours=24)
    [(rid, block)] = proxy.capacity_reservations(REGION).items()
    with Store(home) as store:
        [row] = blocks.of_gang(store, "k-paid")
        assert (row.state, row.reservation, row.zone, row.nodes, row.upfront_usd) == (
            "bought", rid, ZONES["use1-az1"], 2, 1432.80)
        assert (row.start_at, row.end_at) == pytest.approx((block["start"], block["end"]), abs=1.0)
        result = down(store, "k-paid", settings=settings())
    assert (result.state, result.errors) == ("terminated", ())
    [line] = result.blocks
    end = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(block["end"]))
    assert rid in line and f"paid until its end at {end}" in line and "$1,432.80" in line, line
    assert cluster.groups() == {}
    assert proxy.log.count(method=f"DELETE /clusters/{cluster.name}/node-groups/k-paid-1") == 0, "none was made"
    assert list(proxy.capacity_reservations(REGION)) == [rid], "the block stays: EC2 cannot cancel one"
    assert_clean(home, cluster, "k-paid", proxy)


def test_killed_while_the_purchase_is_held_names_the_offering(tmp_path: Path, proxy: Ec2FaultProxy,
                                                              cluster: EksCluster) -> None:
    """The process dies while PurchaseCapacityBlock is held by the server: the store has the intent (`buying`,
    the offering and its fee), and `down` says the block may have been bought and how to find it."""
    offering = proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], "p4d.24xlarge", 2, 24, 1432.80)
    held = proxy.inject(Ec2Fault.stall(4.0), action="PurchaseCapacityBlock")
    home = tmp_path / "home"
    kill_when(home, proxy, cluster, "k-buy", lambda: held.hits > 0, block_hours=24)
    with Store(home) as store:
        [row] = blocks.of_gang(store, "k-buy")
        assert (row.state, row.offering, row.reservation) == ("buying", offering, None)
        result = down(store, "k-buy", settings=settings())
    [line] = result.blocks
    assert offering in line and "may have been bought" in line and "geosched-gang=k-buy" in line, line
    assert_clean(home, cluster, "k-buy", proxy)


def test_killed_while_a_later_blocks_scheduled_action_is_held(tmp_path: Path, proxy: Ec2FaultProxy,
                                                              cluster: EksCluster, moto: MotoServer) -> None:
    """A Capacity Block that starts in two days: the group is ACTIVE at 0 nodes when the process dies, its first
    scheduled action held by the server (forwarded to moto after the kill). `down` deletes the group and its
    template, and the actions by name (AWS deletes them with the group's Auto Scaling group; moto keeps them apart,
    so deleting them is what is checked); the ledger has no node-hour (no node runs before the block's start)."""
    import boto3  # type: ignore[import-untyped]

    start = (int(time.time() // 86400) + 2) * 86400 + 11.5 * 3600
    proxy.add_capacity_block_offering(REGION, ZONES["use1-az1"], "p4d.24xlarge", 2, 24, 1432.80, start=start)
    held = proxy.inject(Ec2Fault.stall(2.0), action="PutScheduledUpdateGroupAction")
    home = tmp_path / "home"
    kill_when(home, proxy, cluster, "k-later", lambda: held.hits > 0, block_hours=24, within_h=72.0)
    assert list(cluster.groups()) == ["k-later-1"]
    deadline = time.monotonic() + 30.0
    while proxy.log.count(method="PutScheduledUpdateGroupAction") == 0 and time.monotonic() < deadline:
        time.sleep(0.02)  # real sleep: the proxy forwards the held action to the real moto server on its own time
    with Store(home) as store:
        names = list(spec.action_names(journal.owner(store), "k-later-1"))
    scaling = boto3.client("autoscaling", region_name=REGION, endpoint_url=moto.url, aws_access_key_id="testing",
                           aws_secret_access_key="testing")
    assert len(scaling.describe_scheduled_actions(ScheduledActionNames=names)["ScheduledUpdateGroupActions"]) == 1
    assert_clean(home, cluster, "k-later", proxy)
    assert scaling.describe_scheduled_actions(ScheduledActionNames=names)["ScheduledUpdateGroupActions"] == []
    with Store(home) as store:
        assert [i.end - i.start for i in ledger_intervals(store) if i.job == "k-later"] == [0.0, 0.0]
    assert len(proxy.capacity_reservations(REGION)) == 1, "the block stays: EC2 cannot cancel it"
