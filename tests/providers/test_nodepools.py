"""GKE node pools for a gang, end to end on the GKE REST double over a real socket with google-cloud-container
unchanged (REST transport): the pool in the zone the plan chose with the accelerator, spot, compact placement and
the gang's size; failover to the next zone when a pool's create fails for capacity (the operation's error, the
pool left ERROR: deleted); a create whose answer is lost (a half-created pool: deleted); a refused request; the
deadline; and `down` deleting geosched's pools and nothing else.

GKE shapes: cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters.nodePools
(create, get, list, delete), .../projects.locations.operations (get); the double cites each.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from geosched.core.errors import InputError
from geosched.core.retry import RetryPolicy
from geosched.providers import journal
from geosched.providers.gang import plan_gang
from geosched.providers.nodegroups import journal as groups_journal
from geosched.providers.nodegroups.gke import Gke
from geosched.providers.nodegroups.launch import GroupResult, GroupSettings, down, provision, read_cluster
from geosched.providers.plan import PricingMode
from geosched.store.db import Store
from geosched_emulators.gke import GkeDouble, GkeFault
from tests.providers.gke_support import CLUSTER, LOCATION, MACHINE, PROJECT, make_cluster, request
from tests.providers.groups_support import fast
from tests.providers.prov_support import gcp_provider

pytestmark = pytest.mark.integration


@pytest.fixture
def gke() -> Iterator[GkeDouble]:
    # Operations take a moment, as GKE's take minutes: the pool is PROVISIONING first and its operation is polled.
    with GkeDouble(operation_delay_s=0.05) as double:
        make_cluster(double)
        yield double


def backend(gke: GkeDouble) -> Gke:
    return Gke(LOCATION, project=PROJECT, endpoint=gke.endpoint)


def run(store: Store, gke: GkeDouble, gang: str, settings: GroupSettings | None = None, nodes: int = 2,
        pricing: PricingMode = PricingMode.ON_DEMAND) -> GroupResult:
    b = backend(gke)
    plan = plan_gang(request(nodes, pricing), {"gcp": gcp_provider("http://127.0.0.1:9")}, store)
    found = read_cluster(b, CLUSTER, settings or fast())
    return provision(plan, found, b, store, gang=gang, settings=settings or fast())


def plan_zones(store: Store) -> list[str]:
    plan = plan_gang(request(2), {"gcp": gcp_provider("http://127.0.0.1:9")}, store)
    return [c.zone for c in plan.candidates if c.instance_type == MACHINE]


def test_the_pool_goes_into_the_first_zone_with_the_accelerator_and_the_gang_pinned(store: Store,
                                                                                       gke: GkeDouble) -> None:
    first = plan_zones(store)[0]
    result = run(store, gke, "g-first")
    assert result.ok, result.message
    pools = gke.pools()
    assert list(pools) == [f"{LOCATION}/{CLUSTER}/g-first-1"]
    p = pools[f"{LOCATION}/{CLUSTER}/g-first-1"]
    assert p["status"] == "RUNNING"
    assert p["locations"] == [first]
    assert p["initialNodeCount"] == 2
    assert p["autoscaling"] == {"enabled": True, "minNodeCount": 2, "maxNodeCount": 2}
    assert p["placementPolicy"] == {"type": "COMPACT"}
    config = p["config"]
    assert config["machineType"] == MACHINE
    assert config["accelerators"] == [{"acceleratorCount": "8", "acceleratorType": "nvidia-h100-80gb",
                                       "gpuDriverInstallationConfig": {"gpuDriverVersion": "DEFAULT"}}]
    assert config["labels"] == {"geosched.io/gang": "g-first"}
    assert "spot" not in config or config["spot"] is False
    owner = journal.owner(store)
    assert config["resourceLabels"] == {"geosched-gang": "g-first", "geosched-owner": owner,
                                        "geosched-attempt": "g-first-1"}
    rows = groups_journal.groups(store, gang="g-first")
    assert [(r.name, r.state, r.zone, r.subnet) for r in rows] == [("g-first-1", "created", first, LOCATION)]
    assert rows[0].arn is not None and rows[0].arn.endswith("/nodePools/g-first-1")
    assert journal.gang_record(store, "g-first").state == "ready"  # type: ignore[union-attr]
    assert gke.call_count("operations.get") >= 1  # the create's long-running operation was polled


def test_spot_is_asked_as_spot(store: Store, gke: GkeDouble) -> None:
    result = run(store, gke, "g-spot", pricing=PricingMode.SPOT)
    assert result.ok, result.message
    assert gke.pools()[f"{LOCATION}/{CLUSTER}/g-spot-1"]["config"]["spot"] is True


def test_a_stockout_fails_over_to_the_next_zone_and_the_failed_pool_is_deleted(store: Store, gke: GkeDouble) -> None:
    zones = plan_zones(store)
    gke.inject(GkeFault.stockout(), zone=zones[0], method="nodePools.create")
    result = run(store, gke, "g-over")
    assert result.ok, result.message
    assert list(gke.pools()) == [f"{LOCATION}/{CLUSTER}/g-over-2"]
    assert gke.pools()[f"{LOCATION}/{CLUSTER}/g-over-2"]["locations"] == [zones[1]]
    first, second = (a for a in result.attempts if a.outcome != "skipped")
    assert (first.zone, first.outcome, first.error_kind) == (zones[0], "rolled-back", "capacity")
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in (first.message or "")
    assert (second.zone, second.outcome) == (zones[1], "launched")
    rows = groups_journal.groups(store, gang="g-over")
    assert [(r.name, r.state) for r in rows] == [("g-over-1", "deleted"), ("g-over-2", "created")]


def test_a_quota_failure_rules_out_the_region(store: Store, gke: GkeDouble) -> None:
    gke.inject(GkeFault.quota(), method="nodePools.create")
    result = run(store, gke, "g-quota")
    assert not result.ok
    assert gke.pools() == {}
    tried = [a for a in result.attempts if a.outcome not in ("skipped",)]
    assert [a.error_kind for a in tried] == ["quota"]  # the other zones of the region were not tried


def test_a_create_whose_answer_is_lost_is_a_half_created_pool_and_is_deleted(store: Store, gke: GkeDouble) -> None:
    # The server makes the pool but the answer never arrives in time (the call is held past its timeout):
    # the outcome is unknown, so the pool found under the journalled name is deleted before the next zone.
    zones = plan_zones(store)
    gke.inject(GkeFault.stall(1.5), zone=zones[0], method="nodePools.create")
    result = run(store, gke, "g-half", fast(call_timeout_s=0.5, settle_s=4.0, retry=RetryPolicy(attempts=1)))
    assert result.ok, result.message
    first = next(a for a in result.attempts if a.outcome != "skipped")
    assert (first.zone, first.outcome, first.error_kind) == (zones[0], "rolled-back", "stall")
    assert list(gke.pools()) == [f"{LOCATION}/{CLUSTER}/g-half-2"]
    assert [r.state for r in groups_journal.groups(store, gang="g-half")] == ["deleted", "created"]


def test_a_refused_request_stops_at_once_and_creates_nothing(store: Store, gke: GkeDouble) -> None:
    gke.inject(GkeFault.http("INVALID_ARGUMENT", "Accelerator type \"nvidia-h100-80gb\" is not valid."),
               method="nodePools.create")
    result = run(store, gke, "g-refused")
    assert not result.ok
    assert "GKE refused the node pool request" in result.message
    assert gke.pools() == {}
    assert [r.state for r in groups_journal.groups(store, gang="g-refused")] == ["deleted"]


def test_an_incompatible_operation_is_retried(store: Store, gke: GkeDouble) -> None:
    gke.inject(GkeFault.incompatible_operation(), method="nodePools.create")
    result = run(store, gke, "g-busy")
    assert result.ok, result.message
    assert gke.call_count("nodePools.create") == 2


def test_a_pool_that_never_comes_up_is_deleted_at_the_deadline(store: Store, gke: GkeDouble) -> None:
    clock = itertools.count(0.0, 10.0)
    gke.inject(GkeFault.hold(), method="nodePools.create", times="always")
    result = run(store, gke, "g-slow", fast(active_timeout_s=30.0, clock=lambda: next(clock)), nodes=2)
    assert not result.ok
    assert gke.pools() == {}
    assert {a.error_kind for a in result.attempts if a.outcome != "skipped"} == {"stall"}


def test_down_deletes_the_gangs_pools_and_leaves_a_foreign_one(store: Store, gke: GkeDouble) -> None:
    assert run(store, gke, "g-down").ok
    # Someone else's pool in the same cluster, and one with a geosched name but another store's owner label.
    create(gke, "system", {})
    create(gke, "g-other-1", {"geosched-gang": "g-down", "geosched-owner": "o-another-store"})
    gone = down(store, "g-down", lambda _p, _r: backend(gke), fast())
    assert (gone.state, gone.deleted, gone.errors) == ("terminated", 1, ())
    assert sorted(gke.pools()) == [f"{LOCATION}/{CLUSTER}/g-other-1", f"{LOCATION}/{CLUSTER}/system"]
    assert journal.gang_record(store, "g-down").state == "terminated"  # type: ignore[union-attr]
    assert [r.state for r in groups_journal.groups(store, gang="g-down")] == ["deleted"]


def test_down_finds_a_labelled_pool_the_journal_lost(store: Store, gke: GkeDouble) -> None:
    assert run(store, gke, "g-tags").ok
    # A second pool labelled with the gang's first attempt (a create whose answer, and row, never came back).
    create(gke, "g-tags-9", {"geosched-gang": "g-tags", "geosched-owner": journal.owner(store),
                             "geosched-attempt": "g-tags-1"})
    gone = down(store, "g-tags", lambda _p, _r: backend(gke), fast())
    assert (gone.state, gone.deleted) == ("terminated", 2)
    assert gke.pools() == {}


def create(gke: GkeDouble, name: str, resource_labels: dict[str, str]) -> None:
    """A pool made by someone else, straight through google-cloud-container."""
    from google.cloud import container_v1

    client = container_v1.ClusterManagerClient(**gke.client_kwargs())
    parent = f"projects/{PROJECT}/locations/{LOCATION}/clusters/{CLUSTER}"
    client.create_node_pool(request={"parent": parent, "node_pool": {
        "name": name, "initial_node_count": 1, "locations": [f"{LOCATION}-a"],
        "config": {"machine_type": "e2-standard-4", "resource_labels": resource_labels}}})


def test_an_unknown_cluster_is_one_input_error(store: Store, gke: GkeDouble) -> None:
    with pytest.raises(InputError) as err:
        read_cluster(backend(gke), "no-such-cluster", fast())
    assert "no GKE cluster 'no-such-cluster' in location us-central1" in str(err.value)
