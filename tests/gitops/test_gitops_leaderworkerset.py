"""A LeaderWorkerSet in a GitOps tree (the upstream vLLM example, tests/kube/data/leaderworkerset.yaml): rendered
into its cluster's directory with its leader Service, valid for the LWS v0.10.0 CRD, and stable on a re-render."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from gitops_support import AT, JOBS, kube_validator, write_inputs

from geosched.files.fields import parse_time
from geosched.gitops import check_tree, render_tree

LWS = Path(__file__).resolve().parents[1] / "kube" / "data" / "leaderworkerset.yaml"


def test_a_leaderworkerset_is_rendered_into_the_tree(tmp_path: Path) -> None:
    write_inputs(tmp_path)
    for name in JOBS:  # the set alone: 4 x 8 GPUs fill one lab zone
        (tmp_path / "jobs" / name).unlink()
    shutil.copy(LWS, tmp_path / "jobs" / "vllm.yaml")
    at = parse_time(AT, "test", "")

    result = render_tree(tmp_path / "jobs", tmp_path / "snapshot", tmp_path / "clusters.yaml", tmp_path, at=at)

    [written] = [p for p in result.changes.written if p.endswith("/vllm.yaml")]
    manifests = list(yaml.safe_load_all((tmp_path / written).read_text(encoding="utf-8")))
    assert [m["kind"] for m in manifests if m["kind"] != "PodGroup"] == ["Service", "LeaderWorkerSet"]
    validate = kube_validator()
    for m in manifests:
        validate(m)
    lws = manifests[-1]
    assert lws["metadata"]["annotations"]["geosched.io/cluster"] == written.split("/")[1]
    assert check_tree(tmp_path / "jobs", tmp_path / "snapshot", tmp_path / "clusters.yaml", tmp_path).up_to_date
