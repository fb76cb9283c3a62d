"""`sweep` for node groups and node pools (geosched/providers/nodegroups/sweep.py): a group geosched made that no open
journal row names is found in the clusters named, listed without a change, and deleted with `down`'s code (its
launch template and cluster placement group too); a group without geosched's tags, another owner's, or one an open
row names is never touched. EKS on moto's server with real boto3 (the fault proxy's endpoint, as test_nodegroups.py),
GKE on the project's REST double with google-cloud-container unchanged (as test_nodepools.py).

The lost store is a backup taken before the gang was made (SQLite's online backup of the live store): the same owner,
no row of the gang, which is what restoring a store, or running `up` from another checkout of it, leaves.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from geosched.providers import journal
from geosched.providers.gang import plan_gang
from geosched.providers.nodegroups import journal as groups_journal
from geosched.providers.nodegroups import spec
from geosched.providers.nodegroups.eks import Eks
from geosched.providers.nodegroups.gke import Gke
from geosched.providers.nodegroups.launch import down, provision, read_cluster
from geosched.providers.nodegroups.sweep import Place, known_places, sweep
from geosched.report.ledger import ledger_intervals
from geosched.store.db import DB_NAME, Store
from geosched_emulators import Ec2FaultProxy, MotoServer
from geosched_emulators.gke import GkeDouble
from tests.providers import gke_support
from tests.providers.eks_support import NODE_ROLE, REGION, EksCluster, launch_templates, make_cluster, request
from tests.providers.groups_support import fast
from tests.providers.prov_support import aws_provider, gcp_provider

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(moto: MotoServer, proxy: Ec2FaultProxy) -> Iterator[EksCluster]:
    yield make_cluster(moto.url)


def backup(store: Store, home: Path) -> Store:
    """A copy of `store` as it is now, opened as a store of its own (same owner, same rows)."""
    home.mkdir(mode=0o700)
    target = sqlite3.connect(home / DB_NAME)
    store.db.backup(target)
    target.close()
    (home / DB_NAME).chmod(0o600)  # as a store's file is (geosched/store/db.py narrows a wider one, with a note)
    return Store(home)


def eks_gang(store: Store, cluster: EksCluster, gang: str) -> None:
    eks = Eks(REGION, node_role=NODE_ROLE)
    plan = plan_gang(request(2), {"aws": aws_provider((REGION,))}, store)
    assert provision(plan, read_cluster(eks, cluster.name, fast()), eks, store, gang=gang, settings=fast()).ok


def test_eks_orphan_is_listed_then_deleted_with_its_parts_and_nothing_else(
        store: Store, cluster: EksCluster, proxy: Ec2FaultProxy, tmp_path: Path) -> None:
    owner = journal.owner(store)
    lost = backup(store, tmp_path / "restored")  # taken before the gang: knows the owner, not the gang
    try:
        eks_gang(store, cluster, "g-lost")
        eks_gang(lost, cluster, "g-kept")  # the restored store's own gang: an open row names it
        prefix = spec.part_name(owner, "g-lost-")
        assert launch_templates(cluster, prefix), "a p4d group is made in a cluster placement group"
        # Someone else's group, and one carrying geosched's tags for another store's owner.
        cluster.eks.create_nodegroup(clusterName=cluster.name, nodegroupName="team-cpu", nodeRole=NODE_ROLE,
                                     subnets=[cluster.subnets["use1-az1"]], tags={"team": "data"})
        cluster.eks.create_nodegroup(clusterName=cluster.name, nodegroupName="g-other-1", nodeRole=NODE_ROLE,
                                     subnets=[cluster.subnets["use1-az1"]],
                                     tags={"geosched-gang": "g-other", "geosched-owner": "o-another-store"})
        place = Place("aws", REGION, cluster.name)
        assert known_places(lost) == (place,)  # where a sweep naming no cluster looks: the journal's clusters

        listed = sweep(lost, [place], settings=fast())
        assert [(f.pool.name, f.gang, f.owner, f.kind) for f in listed.orphans] == [
            ("g-lost-1", "g-lost", owner, "node group")]
        assert [f.pool.name for f in listed.foreign] == ["g-other-1"]
        assert (listed.deleted, listed.errors) == (0, ())
        assert sorted(cluster.groups()) == ["g-kept-1", "g-lost-1", "g-other-1", "team-cpu"]  # listing changes nothing

        done = sweep(lost, [place], delete=True, settings=fast())
        assert (done.deleted, done.errors) == (1, ())
        assert sorted(cluster.groups()) == ["g-kept-1", "g-other-1", "team-cpu"]
        assert launch_templates(cluster, prefix) == {}, "the group's launch template goes with it"
        assert not any(name.startswith(prefix) for name in proxy.placement_groups(REGION)), "and its placement group"
        # Journalled under its own gang in the restored store: deleted, its nodes charged until then and no longer.
        rows = [r for r in groups_journal.groups(lost) if r.name == "g-lost-1"]
        assert [(r.gang, r.state, r.instance_type, r.nodes, r.cluster) for r in rows] == [
            ("g-lost", "deleted", "p4d.24xlarge", 2, cluster.name)]
        record = journal.gang_record(lost, "g-lost")
        assert record is not None and (record.owner, record.state) == (owner, "terminated")
        mine = [i for i in ledger_intervals(lost) if i.name.startswith("g-lost-1#")]
        assert len(mine) == 2 and all(i.end is not None and i.cluster == cluster.name for i in mine)

        assert sweep(lost, [place], settings=fast()).orphans == ()
        # The other owner's group is swept only when asked for.
        anyone = sweep(lost, [place], delete=True, any_owner=True, settings=fast())
        assert ([f.pool.name for f in anyone.orphans], anyone.deleted) == (["g-other-1"], 1)
        assert sorted(cluster.groups()) == ["g-kept-1", "team-cpu"]
    finally:
        lost.close()


def test_an_eks_group_whose_row_was_closed_is_found_again_and_reopened(store: Store, cluster: EksCluster) -> None:
    eks_gang(store, cluster, "g-again")
    row = groups_journal.groups(store, gang="g-again")[0]
    # `down` closed the row while the group still stands (a create still in flight landed after it looked).
    groups_journal.mark(store, row.id, "deleted", note="not found in the cluster")
    done = sweep(store, [Place("aws", REGION, cluster.name)], delete=True, settings=fast())
    assert (done.deleted, done.errors, [f.pool.name for f in done.orphans]) == (1, (), ["g-again-1"])
    assert cluster.groups() == {}
    assert [(r.id, r.state, r.note) for r in groups_journal.groups(store, gang="g-again")] == [
        (row.id, "deleted", "found again by sweep")]


class Killed(BaseException):
    """The process dying at the delete call (as SIGKILL would, but inside the test)."""


def test_a_sweep_killed_before_the_delete_leaves_a_gang_down_finishes(store: Store, cluster: EksCluster,
                                                                     tmp_path: Path) -> None:
    owner = journal.owner(store)
    lost = backup(store, tmp_path / "restored")
    try:
        eks_gang(store, cluster, "g-kill")
        # A second group of the lost gang (a later attempt the store made before it was lost): it joins the first.
        cluster.eks.create_nodegroup(clusterName=cluster.name, nodegroupName="g-kill-7", nodeRole=NODE_ROLE,
                                     subnets=[cluster.subnets["use1-az2"]],
                                     tags={"geosched-gang": "g-kill", "geosched-owner": owner,
                                           "geosched-attempt": "g-kill-7"})
        real = Eks(REGION)

        def dies(*_args: object) -> bool:
            raise Killed

        real.delete = dies  # type: ignore[method-assign]
        with pytest.raises(Killed):
            sweep(lost, [Place("aws", REGION, cluster.name)], lambda _p, _r: real, delete=True, settings=fast())
        record = journal.gang_record(lost, "g-kill")
        assert record is not None and (record.owner, record.state) == (owner, "terminating")
        assert sorted(cluster.groups()) == ["g-kill-1", "g-kill-7"]
        result = down(lost, "g-kill", settings=fast())  # a fresh process: down as for any gang
        assert (result.state, result.deleted, result.errors) == ("terminated", 2, ())
        assert cluster.groups() == {}
        assert launch_templates(cluster, spec.part_name(owner, "g-kill-")) == {}
    finally:
        lost.close()


def test_a_cluster_the_cloud_does_not_know_is_an_error_not_nothing(store: Store, proxy: Ec2FaultProxy) -> None:
    found = sweep(store, [Place("aws", REGION, "no-such-cluster")], settings=fast())
    assert found.orphans == ()
    assert found.errors == ("EKS cluster no-such-cluster (us-east-1): not swept: unsupported: no EKS cluster "
                            "'no-such-cluster' in region us-east-1",)


@pytest.fixture
def gke() -> Iterator[GkeDouble]:
    with GkeDouble(operation_delay_s=0.05) as double:
        gke_support.make_cluster(double)
        yield double


def test_gke_orphan_pool_is_deleted_and_the_journalled_one_kept(store: Store, gke: GkeDouble, tmp_path: Path) -> None:
    b = Gke(gke_support.LOCATION, project=gke_support.PROJECT, endpoint=gke.endpoint)
    journal.owner(store)  # made on first use: the backup must hold it
    lost = backup(store, tmp_path / "restored")
    try:
        for s, gang in ((store, "p-lost"), (lost, "p-kept")):
            plan = plan_gang(gke_support.request(2), {"gcp": gcp_provider("http://127.0.0.1:9")}, s)
            found = read_cluster(b, gke_support.CLUSTER, fast())
            assert provision(plan, found, b, s, gang=gang, settings=fast()).ok
        place = Place("gcp", gke_support.LOCATION, gke_support.CLUSTER)
        assert known_places(lost) == (place,)  # a GKE row's location is where its pool is addressed
        backend = lambda _p, location: Gke(location, project=gke_support.PROJECT, endpoint=gke.endpoint)  # noqa: E731
        listed = sweep(lost, [place], backend, settings=fast())
        assert listed.errors == ()
        assert [(f.pool.name, f.kind, f.pool.instance_type) for f in listed.orphans] == [
            ("p-lost-1", "node pool", gke_support.MACHINE)]
        assert len(gke.pools()) == 2
        done = sweep(lost, [place], backend, delete=True, settings=fast())
        assert (done.deleted, done.errors) == (1, ())
        assert list(gke.pools()) == [f"{gke_support.LOCATION}/{gke_support.CLUSTER}/p-kept-1"]
        rows = [r for r in groups_journal.groups(lost) if r.name == "p-lost-1"]
        assert [(r.state, r.region, r.subnet) for r in rows] == [("deleted", "us-central1", gke_support.LOCATION)]
    finally:
        lost.close()
