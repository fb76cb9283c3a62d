"""The report's note on Karpenter capacity it does not charge (geosched/store/uncharged.py, report/assemble.py):
which renders it counts (those before the window's end, each gang and cluster once) and how it names them."""

from __future__ import annotations

from pathlib import Path

from geosched.report.assemble import karpenter_note
from geosched.store.db import Store
from geosched.store.uncharged import karpenter_renders, record_karpenter


def render(store: Store, gang: str, cluster: str, at: float) -> None:
    record_karpenter(store, gang=gang, cluster=cluster, region="us-east-1", pools=[f"{gang}-1", f"{gang}-2"],
                     instance_type="p5.48xlarge", capacity_type="spot", nodes=8, destination="stdout", at=at)


def test_renders_before_the_window_end_count_once_per_gang_and_cluster(tmp_path: Path) -> None:
    with Store(tmp_path / "home") as store:
        render(store, "g1", "east", 100.0)
        render(store, "g1", "east", 200.0)  # rendered again: the same capacity
        render(store, "g1", "west", 300.0)  # the same gang's name in another cluster: other capacity
        render(store, "g2", "east", 400.0)
        assert [r.pools for r in karpenter_renders(store, 150.0)] == [("g1-1", "g1-2")]
        assert karpenter_note(karpenter_renders(store, 50.0)) is None  # the window ended before any render
        note = karpenter_note(karpenter_renders(store, 350.0))
        assert note is not None and note.startswith(
            "2 gang(s) of Karpenter capacity geosched rendered for GitOps (provision|up --karpenter: g1 in cluster "
            "east, g1 in cluster west) are not charged")


def test_more_than_three_gangs_are_counted_not_all_named(tmp_path: Path) -> None:
    with Store(tmp_path / "home") as store:
        for i in range(5):
            render(store, f"g{i}", "east", 100.0 + i)
        note = karpenter_note(karpenter_renders(store))
    assert note is not None
    assert "(provision|up --karpenter: g0 in cluster east, g1 in cluster east, g2 in cluster east and 2 more)" in note
    assert note.startswith("5 gang(s)")
