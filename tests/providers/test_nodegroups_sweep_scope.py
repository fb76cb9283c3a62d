"""Which clusters `geosched sweep` looks in for node groups / node pools (review findings of stop 36): without
`--cluster`, the clusters the journal knows, within `--provider` and `--region` as the machine sweep is; a cluster
only the journal names that has since been deleted holds no groups and is not an error, while one the user names
that the cloud does not know still is (test_nodegroups_sweep.py).

The backend is an in-memory stand-in on purpose: what is tested is which clusters the CLI asks about and what it
deletes there, not the cloud's answers (moto's EKS and the GKE double cover those in test_nodegroups_sweep.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from geosched.providers import cli as provider_cli
from geosched.providers import journal
from geosched.providers.base import ATTEMPT_TAG, GANG_TAG, OWNER_TAG, Budget
from geosched.providers.nodegroups import journal as groups_journal
from geosched.providers.nodegroups import launch
from geosched.providers.nodegroups.backend import ACTIVE, Pool
from geosched.store.db import Store
from tests.providers.test_prov_cli import run


class Pools:
    """GKE node pools by cluster, as the node-group backend sees them; records what was deleted."""
    provider, cloud, kind, scope = "gcp", "GKE", "node pool", "location"

    def __init__(self, clusters: dict[str, dict[str, Pool]]) -> None:
        self.clusters = clusters
        self.asked: list[str] = []
        self.deleted: list[str] = []

    def cluster(self, name: str, budget: Budget) -> Any:
        self.asked.append(name)
        return object() if name in self.clusters else None

    def names(self, cluster: str, where: str, budget: Budget) -> list[str]:
        return list(self.clusters.get(cluster, {}))

    def describe(self, cluster: str, where: str, name: str, budget: Budget) -> Pool | None:
        return self.clusters.get(cluster, {}).get(name)

    def delete(self, cluster: str, where: str, name: str, budget: Budget) -> bool:
        self.deleted.append(name)
        return self.clusters[cluster].pop(name, None) is not None

    def release(self, name: str, **kw: Any) -> list[str]:
        return []


def journal_knows(home: Path, cluster: str) -> str:
    """A store whose journal once made (and deleted) a GKE pool in `cluster` of europe-west4; its owner."""
    with Store(home) as store:
        me = journal.owner(store)
        journal.create_gang(store, "old", me, None, node_groups=True)
        row = groups_journal.record_found(store, "old", provider="gcp", region="europe-west4", cluster=cluster,
                                          where="europe-west4-a", name="old-1", instance_type="a3-highgpu-8g",
                                          capacity_type="ON_DEMAND", nodes=2, arn=None, token="t")
        groups_journal.mark(store, row.id, "deleted")
        journal.set_gang(store, "old", "terminated")
        return me


@pytest.fixture
def no_machines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provider_cli.registry, "build", lambda names, settings: {})


def test_a_sweep_of_one_provider_and_region_leaves_another_cloud_s_pools(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_machines: None) -> None:
    home = tmp_path / "home"
    me = journal_knows(home, "c1")
    orphan = Pool("x-1", ACTIVE, {GANG_TAG: "x", OWNER_TAG: me, ATTEMPT_TAG: "t"}, None, "europe-west4-a",
                  "ON_DEMAND", 4)
    pools = Pools({"c1": {"x-1": orphan}})
    monkeypatch.setattr(launch, "open_backend", lambda provider, region: pools)
    out = run(home, "sweep", "--provider", "aws", "--region", "us-east-1", "--yes")
    assert out.exit_code == 0, out.output
    assert (pools.asked, pools.deleted) == ([], []), "an AWS us-east-1 sweep never reaches a GKE cluster"
    out = run(home, "sweep", "--provider", "gcp", "--region", "europe-west4", "--yes")
    assert out.exit_code == 0, out.output
    assert pools.deleted == ["x-1"], "the same orphan is swept when its provider and region are asked for"


def test_a_cluster_only_the_journal_names_that_is_gone_is_not_an_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_machines: None) -> None:
    home = tmp_path / "home"
    journal_knows(home, "gone")
    pools = Pools({})
    monkeypatch.setattr(launch, "open_backend", lambda provider, region: pools)
    out = run(home, "sweep")
    assert (out.exit_code, pools.asked) == (0, ["gone"]), out.output
    assert "not swept" not in out.output
