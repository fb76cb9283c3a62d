"""A provisioning process killed with SIGKILL while it makes a node group leaves a journal that `down` cleans
fully: no node group of the gang is left in the cluster and no journal row stays open.

Three moments: while the process waits for a created group to become ACTIVE (the proxy keeps answering CREATING:
moto makes every group ACTIVE at once, eks_extras.py); while its CreateNodegroup request is held by the server
(the proxy stalls it, then forwards it to moto: the group appears after the process died, and `down` finds it
through the intent row, waiting for the intent to settle); and while the DeleteNodegroup of a group that failed
for capacity is held (the row says `deleting`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from geosched.providers.gang import plan_gang
from geosched.providers.nodegroups import journal as groups_journal
from geosched.providers.nodegroups.eks import Eks
from geosched.providers.nodegroups.launch import provision, read_cluster
from geosched.store import Store
from geosched_emulators import Ec2Fault, Ec2FaultProxy, MotoServer
from geosched_emulators.eks_extras import capacity_issue
from tests.providers import groups_support
from tests.providers.eks_support import NODE_ROLE, REGION, ZONES, EksCluster, make_cluster, request
from tests.providers.groups_support import row_in, settings
from tests.providers.prov_support import aws_env, aws_provider

pytestmark = pytest.mark.integration


def child(home: str, env: dict[str, str], cluster: str, gang: str) -> None:
    """The provisioning process: what `geosched provision --cluster` runs, in a process of its own."""
    os.environ.update(env)
    with Store(Path(home)) as store:
        eks = Eks(REGION, node_role=NODE_ROLE)
        plan = plan_gang(request(2), {"aws": aws_provider((REGION,))}, store)
        provision(plan, read_cluster(eks, cluster, settings()), eks, store, gang=gang,
                  settings=settings())


def kill_when(home: Path, proxy: Ec2FaultProxy, cluster: EksCluster, gang: str, ready: Callable[[], bool]) -> None:
    groups_support.kill_when(child, (str(home), aws_env(proxy.url), cluster.name, gang), gang, ready)


def assert_clean(home: Path, cluster: EksCluster, gang: str) -> None:
    groups_support.assert_clean(home, gang, cluster.groups, "node group")


@pytest.fixture
def cluster(moto: MotoServer, proxy: Ec2FaultProxy) -> EksCluster:
    return make_cluster(moto.url)


def test_killed_while_waiting_for_active(tmp_path: Path, proxy: Ec2FaultProxy, cluster: EksCluster) -> None:
    for zone in ZONES.values():
        proxy.nodegroups.set(zone, "CREATING")
    home = tmp_path / "home"
    kill_when(home, proxy, cluster, "k-wait", row_in(home, "k-wait", "created"))
    assert list(cluster.groups()) == ["k-wait-1"], "the killed process left its group behind"
    proxy.nodegroups.clear()
    assert_clean(home, cluster, "k-wait")


def test_killed_while_the_create_is_held_by_the_server(tmp_path: Path, proxy: Ec2FaultProxy,
                                                       cluster: EksCluster) -> None:
    # Held for less than the settle time, so the group lands while `down` still looks for it.
    create = f"POST /clusters/{cluster.name}/node-groups"
    held = proxy.inject(Ec2Fault.stall(4.0), action=create)
    home = tmp_path / "home"
    kill_when(home, proxy, cluster, "k-held", lambda: held.hits > 0)  # the server holds the create now
    assert cluster.groups() == {}, "killed before the held create reached moto"
    assert_clean(home, cluster, "k-held")
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
    assert_clean(home, cluster, "k-back")
