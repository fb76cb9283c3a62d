"""`down` of one ProvisioningRequest gang never takes another gang's objects (review finding of stop 36, rev36b).

Every gang applies as geosched's field manager, so the manager alone does not say whose an object is: gang A's row
(an intent whose run was killed before its apply, or a provisioned gang whose objects the user deleted with kubectl)
names the same Job, Service, request and PodTemplates as gang B, run later from the same job file in the same
namespace. `down A` deleted B's objects and charged B's nodes to A. Objects `up` applies now carry
`geosched.io/gang` (provreqdown.GANG_ANNOTATION), and `down` takes only its own gang's (or, on objects applied
before the annotation existed, any of geosched's, as before). On the API-server emulator with the stand-in
autoscaler of test_provreq_ledger.py.
"""
from __future__ import annotations

from pathlib import Path

from geosched.cli import provfailover
from geosched.providers import journal
from geosched.store.db import Store
from tests.kubeemu import MultiCluster
from tests.providers.test_provreq_ledger import (
    CANDIDATE,
    GANG,
    NS,
    PROVREQS,
    Autoscaler,
    cluster,  # noqa: F401  (the fixture: the emulated cluster)
    down,
    queue,
    zone,
)


def test_down_of_a_killed_gang_s_intent_leaves_a_later_gang_s_job(cluster: MultiCluster, store: Store,  # noqa: F811
                                                                     tmp_path: Path) -> None:
    api = cluster["cluster-a"]
    # Gang A: killed right after its zone's intent (nothing applied yet).
    journal.create_gang(store, "A", journal.owner(store), GANG, provisioning_request=True)
    a = journal.start_attempt(store, "A", CANDIDATE)
    z = zone(tmp_path)
    provfailover._intend(store, z, a, z.render(), "train-geosched-provisioning")
    # Gang B: the same job file run again (nothing of A's in the cluster, so it applies).
    queue(store, cluster, tmp_path, Autoscaler(cluster), "B", [])
    record = journal.gang_record(store, "B")
    assert record is not None and record.state == "ready"
    down(store, cluster, "A")
    assert api.get("batch/v1/jobs", "train", NS) is not None, "down A deleted gang B's job"
    assert [r["metadata"]["name"] for r in api.list(PROVREQS, NS)] == ["train-geosched-provisioning"]


def test_down_of_a_gang_whose_objects_were_deleted_by_hand_leaves_a_later_gang_s_job(
        cluster: MultiCluster, store: Store, tmp_path: Path) -> None:  # noqa: F811
    api = cluster["cluster-a"]
    autoscaler = Autoscaler(cluster)
    queue(store, cluster, tmp_path, autoscaler, "A", [])
    for path, name in (("batch/v1/jobs", "train"), ("v1/services", "train"), (PROVREQS, "train-geosched-provisioning"),
                       ("v1/podtemplates", "train-geosched-provisioning-0")):
        api.delete(path, name, NS)  # kubectl delete, as the user may
    for pod in api.list("v1/pods", NS):
        api.delete("v1/pods", pod["metadata"]["name"], NS)
    autoscaler()
    queue(store, cluster, tmp_path, autoscaler, "B", [])
    assert api.get("batch/v1/jobs", "train", NS) is not None
    down(store, cluster, "A")
    assert api.get("batch/v1/jobs", "train", NS) is not None, "down A deleted gang B's job"
