"""A flexible job in a GitOps tree (issue 24 item 4): rendered suspended with its start time while it waits for a
greener hour, a fixed point at every `--at` (check passes, a second render writes nothing), released by the render
at or after its start, never after its deadline. Real git, real processes; the lab fleet's two regions carry the
real 2023 series of PJM (r1) and CAISO (r2) in geosched's region CSV."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import yaml
from gitops_support import git, gitops, init_repo, kube_validator, tree_args

from geosched.core.models import HOUR_S
from geosched.grid.shipped import shipped_series

# A batch/v1 Job with slack: a 3 h run that must finish by the next morning. Its 8-GPU pods fit either region.
FLEX = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: flex
  namespace: ml
  annotations:
    geosched.io/runtime: 3h
    geosched.io/deadline: "2023-06-11T08:00:00Z"
spec:
  completions: 1
  parallelism: 1
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: trainer
          image: ghcr.io/example/llm:1.0
          resources:
            limits:
              nvidia.com/gpu: 8
"""
DECIDED = "2023-06-10T08:00:00Z"  # California's night: its solar hours are ahead


def carbon_csv() -> str:
    """June 9-11, 2023 as measured: PJM for r1, CAISO for r2."""
    first = int(datetime(2023, 6, 9, tzinfo=UTC).timestamp() // HOUR_S)
    rows = ["region,datetime,gco2e_per_kwh"]
    for region, zone in (("lab:r1", "US-MIDA-PJM"), ("lab:r2", "US-CAL-CISO")):
        hours = shipped_series(zone).hours
        rows += [f"{region},{datetime.fromtimestamp(h * HOUR_S, UTC):%Y-%m-%dT%H:00:00Z},{hours[h]}"
                 for h in range(first, first + 72)]
    return "\n".join(rows) + "\n"


def manifest(repo: Path) -> dict[str, object]:
    path = next((repo / "clusters").glob("*/ml/flex.yaml"))
    docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d and d.get("kind") == "Job"]
    job: dict[str, object] = docs[-1]
    return job


def test_a_flexible_job_is_held_suspended_then_released_by_a_later_render(tmp_path: Path) -> None:
    repo = tmp_path / "lab"
    init_repo(repo)
    for name in ("beta.yaml", "huge.yaml", "team-b/gamma.yaml"):  # alpha stays, in r1; r2 is free
        git(repo, "rm", "-q", f"jobs/{name}")
    (repo / "jobs" / "flex.yaml").write_text(FLEX, encoding="utf-8")
    (repo / "carbon.csv").write_text(carbon_csv(), encoding="utf-8")
    (repo / "gitops.yaml").write_text("weights: {network: 1.0, cost: 0.0, carbon: 2.0}\n", encoding="utf-8")
    args = [*tree_args(repo), "--config", str(repo / "gitops.yaml"), "--carbon-hourly", str(repo / "carbon.csv")]

    first = gitops("render", *args, "--at", DECIDED, "--explain")
    assert first.returncode == 0, first.stderr
    held = manifest(repo)
    spec, notes = held["spec"], held["metadata"]["annotations"]  # type: ignore[index]
    assert spec["suspend"] is True  # type: ignore[index]
    start = notes["geosched.io/start-at"]
    assert DECIDED < start <= "2023-06-11T05:00:00Z"  # after now, and the 3 h run still ends by the deadline
    assert notes["geosched.io/submitted-at"] == DECIDED
    assert f"flex: new; held until {start} for a greener grid" in first.stdout
    kube_validator()(held)
    # A fixed point: check passes at the same --at, and a second render writes nothing.
    assert gitops("check", *args, "--at", DECIDED).returncode == 0
    again = gitops("render", *args, "--at", DECIDED)
    assert "0 written" in again.stdout, again.stdout

    at_start = gitops("render", *args, "--at", start, "--explain")
    assert at_start.returncode == 0, at_start.stderr
    released = manifest(repo)
    assert "suspend" not in released["spec"]  # type: ignore[operator]
    assert "geosched.io/start-at" not in released["metadata"]["annotations"]  # type: ignore[index]
    assert "flex: kept (still fits)" in at_start.stdout
    assert gitops("check", *args, "--at", start).returncode == 0
    # Later renders keep it running where it is: never held again.
    later = gitops("render", *args, "--at", "2023-06-10T23:00:00Z", "--explain")
    assert "flex: kept (still fits)" in later.stdout and "suspend" not in manifest(repo)["spec"]  # type: ignore[operator]


def test_past_its_latest_start_a_job_is_placed_as_any_other(tmp_path: Path) -> None:
    repo = tmp_path / "lab"
    init_repo(repo)
    (repo / "jobs" / "flex.yaml").write_text(FLEX, encoding="utf-8")
    (repo / "carbon.csv").write_text(carbon_csv(), encoding="utf-8")
    args = [*tree_args(repo), "--carbon-hourly", str(repo / "carbon.csv")]
    late = gitops("render", *args, "--at", "2023-06-11T06:00:00Z")  # 3 h before the deadline: too late to wait
    assert late.returncode == 0, late.stderr
    assert "suspend" not in manifest(repo)["spec"]  # type: ignore[operator]
    # Said on stderr and beside the decision (before: not a word); only by the render that decides it: once kept,
    # it was placed by an earlier render.
    said = ("job flex cannot finish by its deadline 2023-06-11T08:00Z: it starts now (its predicted 3 h run ends "
            "2023-06-11T09:00Z at the earliest)")
    assert late.stderr == f"warning: ml/flex: {said}\n" and f"ml/flex: new; {said}" in late.stdout
    again = gitops("render", *args, "--at", "2023-06-11T07:00:00Z")
    assert again.returncode == 0 and again.stderr == "" and said not in again.stdout
