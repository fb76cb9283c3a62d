"""render_tree / check_tree in-process: what the tree holds, what it leaves alone, and every kind of bad input."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from gitops_support import AT, CLUSTERS, gitops, kube_validator, lab_fleet, tree_args, write_inputs

from geosched.core.errors import InputError
from geosched.files.fields import parse_time
from geosched.gitops import check_tree, render_tree
from geosched.gitops.index import INDEX, placed_jobs
from geosched.store.db import write_snapshot

WHEN = parse_time(AT, "test", "")
NATIVE_WEST = CLUSTERS.replace("west: {backend: coscheduling}", "west: {backend: workload-api}")
LATER = datetime(2025, 3, 5, 9, 30, tzinfo=UTC)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    write_inputs(tmp_path)
    return tmp_path


def render(repo: Path, *, at: datetime = WHEN, config: Path | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    result = render_tree(repo / "jobs", repo / "snapshot", repo / "clusters.yaml", repo, config=config, at=at)
    return result.changes.written, result.changes.removed


def check(repo: Path) -> str:
    result = check_tree(repo / "jobs", repo / "snapshot", repo / "clusters.yaml", repo)
    return "" if result.up_to_date else result.report()


def manifests(path: Path) -> list[dict[str, object]]:
    return list(yaml.safe_load_all(path.read_text()))


def test_every_rendered_manifest_is_valid_for_its_schema(repo: Path) -> None:
    render(repo)
    validate = kube_validator()
    files = sorted((repo / "clusters").glob("*/*/*.yaml"))
    assert len(files) == 3
    for path in files:
        for obj in manifests(path):
            validate(obj)


def test_a_cluster_on_the_native_gang_api_gets_workload_podgroup_and_pods_that_join_it(repo: Path) -> None:
    (repo / "clusters.yaml").write_text(NATIVE_WEST)
    (repo / "jobs/team-b/gamma.yaml").unlink()  # a PyTorchJob cannot join the group (test below)
    render(repo)
    validate = kube_validator()
    beta = manifests(repo / "clusters/west/default/beta.yaml")
    assert [m["kind"] for m in beta] == ["Workload", "PodGroup", "Service", "Job"]
    for obj in beta:
        validate(obj, ("1.36",))  # the one release serving scheduling.k8s.io/v1alpha2 and spec.schedulingGroup
    workload, group, _, job = beta
    assert workload["spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {"gang": {"minCount": 2}}
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
    assert job["spec"]["template"]["spec"]["schedulingGroup"] == {"podGroupName": "beta"}  # type: ignore[index]
    # The other clusters keep their own backends; the tree is what a render writes.
    assert [m["kind"] for m in manifests(repo / "clusters/east-a/ml/alpha.yaml")] == ["Job"]
    assert check(repo) == ""


def test_a_pytorchjob_on_the_native_gang_api_is_an_input_error(repo: Path) -> None:
    (repo / "clusters.yaml").write_text(NATIVE_WEST)
    with pytest.raises(InputError, match=r"gamma\.yaml: kind: backend workload-api: a kubeflow.org/v1 PyTorchJob"):
        render(repo)


def test_jobs_are_placed_in_order_each_on_what_the_earlier_ones_left(repo: Path) -> None:
    jobs = repo / "jobs"
    for path in jobs.rglob("*.yaml"):
        path.unlink()
    for name in ("first", "second"):
        (jobs / f"{name}.yaml").write_text(f"name: {name}\nworkers: 3\ngpus_per_worker: 8\nregions: [r1]\n"
                                           "image: ghcr.io/example/llm:1.0\n")
    render(repo)
    index = yaml.safe_load((repo / INDEX).read_text())
    # first takes three of r1-a's four nodes (the cheaper zone); second no longer fits there.
    assert index["placed"]["first"]["zones"] == ["r1-a"]
    assert index["placed"]["second"]["zones"] == ["r1-b"]


def test_only_clusters_in_the_config_receive_jobs(repo: Path) -> None:
    render(repo)
    (repo / "clusters.yaml").write_text(CLUSTERS.split("  west:")[0])
    written, removed = render(repo)
    index = yaml.safe_load((repo / INDEX).read_text())
    assert set(index["unplaced"]) == {"beta", "research/gamma", "huge"}
    assert set(removed) == {"clusters/west/README.md", "clusters/west/default/beta.yaml",
                            "clusters/west/research/gamma.yaml"}
    assert written == (INDEX,)
    assert not (repo / "clusters" / "west").exists()


def test_a_hand_edited_manifest_is_stale_and_render_restores_it(repo: Path) -> None:
    render(repo)
    path = repo / "clusters/west/default/beta.yaml"
    original = path.read_bytes()
    path.write_text(path.read_text().replace("parallelism: 2", "parallelism: 3"))
    report = check(repo)
    assert "-  parallelism: 3\n+  parallelism: 2" in report
    assert "beta: clusters/west/default/beta.yaml differs from what its unchanged decision renders to" in report
    assert render(repo) == (("clusters/west/default/beta.yaml",), ())
    assert path.read_bytes() == original


def test_files_geosched_did_not_write_are_left_alone(repo: Path) -> None:
    theirs = {"clusters/east-a/flux-system/gotk-sync.yaml": "apiVersion: v1\nkind: ConfigMap\n",
              "clusters/east-a/notes.txt": "hands off\n", "README.md": "# my repo\n"}
    for name, text in theirs.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    render(repo)
    (repo / "clusters.yaml").write_text("clusters:\n  west: {}\n")  # east-a leaves the config
    render(repo)
    assert not (repo / "clusters/east-a/README.md").exists()
    assert {name: (repo / name).read_text() for name in theirs} == theirs
    assert check(repo) == ""
    # One of theirs where geosched must write is a conflict, not an overwrite.
    (repo / "clusters/west/research/gamma.yaml").write_text("kind: ConfigMap\n")
    with pytest.raises(InputError, match="holds something geosched did not write"):
        render(repo)


def test_a_changed_spec_is_re_rendered_in_place_and_stamped_with_the_new_time(repo: Path) -> None:
    render(repo)
    beta = repo / "jobs/beta.yaml"
    beta.write_text(beta.read_text().replace("vision:2", "vision:3"))
    report = check(repo)
    assert "  beta: re-rendered in place on west [r2-a]\n    the job spec changed" in report
    assert render(repo, at=LATER) == (("clusters/west/default/beta.yaml", INDEX), ())
    job = manifests(repo / "clusters/west/default/beta.yaml")[-1]
    assert job["metadata"]["annotations"]["geosched.io/placed-at"] == "2025-03-05T09:30:00Z"  # type: ignore[index]
    gamma = manifests(repo / "clusters/west/research/gamma.yaml")[-1]
    assert gamma["metadata"]["annotations"]["geosched.io/placed-at"] == AT  # type: ignore[index]


def test_a_comment_or_key_order_change_rewrites_nothing(repo: Path) -> None:
    render(repo)
    beta = repo / "jobs/beta.yaml"
    beta.write_text("# reordered\n" + "\n".join(reversed(beta.read_text().splitlines())) + "\n")
    assert render(repo) == ((), ())


def test_a_damaged_index_costs_only_the_kept_times(repo: Path) -> None:
    render(repo)
    # Damaged as Git leaves it: two branches' renders merged, the conflict markers inside geosched's index (its
    # first line, the same on both sides, is kept: a file that only names the command is not geosched's).
    text = (repo / INDEX).read_text().splitlines(keepends=True)
    (repo / INDEX).write_text("".join([text[0], "<<<<<<< HEAD\n", *text[1:], "=======\n: not yaml [\n",
                                       ">>>>>>> render-on-branch\n"]))
    written, removed = render(repo, at=LATER)
    assert removed == ()
    assert set(written) == {INDEX, "clusters/east-a/ml/alpha.yaml", "clusters/west/default/beta.yaml",
                            "clusters/west/research/gamma.yaml"}
    assert check(repo) == ""


def test_the_settings_choose_policy_and_weights(repo: Path) -> None:
    config = repo / "gitops.yaml"
    config.write_text("kind: GitOpsConfig\npolicy: spread\nweights: {carbon: 1.0}\ncompact_kind: jobset\n")
    render(repo, config=config)
    index = yaml.safe_load((repo / INDEX).read_text())
    assert index["policy"] == "spread"
    assert index["weights"] == {"network": 1.0, "cost": 0.1, "carbon": 1.0}
    kinds = [m["kind"] for m in manifests(repo / "clusters/west/default/beta.yaml")]
    assert kinds[-1] == "JobSet"


def test_the_time_comes_from_the_settings_when_not_given(repo: Path) -> None:
    config = repo / "gitops.yaml"
    config.write_text("at: 2024-12-31T23:00:00-01:00\n")
    render_tree(repo / "jobs", repo / "snapshot", repo / "clusters.yaml", repo, config=config)
    job = manifests(repo / "clusters/east-a/ml/alpha.yaml")[-1]
    assert job["metadata"]["annotations"]["geosched.io/placed-at"] == "2025-01-01T00:00:00Z"  # type: ignore[index]


@pytest.mark.parametrize(("change", "message"), [
    (("jobs/copy.yaml", "BETA"), "job 'beta' is also defined in beta.yaml"),
    (("jobs/bad.yaml", "name: bad\nnamespace: Bad_NS\nworkers: 1\ngpus_per_worker: 1\nimage: x\n"),
     "namespace: must be a lowercase RFC 1123 label"),
    (("jobs/noimage.yaml", "name: noimage\nworkers: 1\ngpus_per_worker: 1\n"), "image: required"),
    (("clusters.yaml", "clusters:\n  ../up: {}\n"), "a cluster name becomes a directory"),
    (("clusters.yaml", "clusters:\n  west: {namespace: ../x}\n"), "clusters.west.namespace"),
    (("gitops.yaml", "policy: best\n"), "unknown policy 'best'"),
    (("gitops.yaml", "at: 2025-03-01T12:00:00\n"), "the time needs an offset"),
    (("gitops.yaml", "weights: {network: -1}\n"), "weights.network: must be >= 0"),
])
def test_bad_input_is_one_input_error(repo: Path, change: tuple[str, str], message: str) -> None:
    name, text = change
    if text == "BETA":
        text = (repo / "jobs/beta.yaml").read_text()
    (repo / name).write_text(text)
    config = repo / "gitops.yaml" if name == "gitops.yaml" else None
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(".", r"\.")):
        render_tree(repo / "jobs", repo / "snapshot", repo / "clusters.yaml", repo, config=config)
    assert not (repo / INDEX).exists()


def test_missing_inputs_are_input_errors(tmp_path: Path) -> None:
    write_inputs(tmp_path)
    with pytest.raises(InputError, match="not a directory of job specs"):
        render_tree(tmp_path / "nope", tmp_path / "snapshot", tmp_path / "clusters.yaml", tmp_path)
    with pytest.raises(InputError, match="not a snapshot directory"):
        render_tree(tmp_path / "jobs", tmp_path / "nope", tmp_path / "clusters.yaml", tmp_path)
    (tmp_path / "snapshot" / "network.yaml").unlink()
    with pytest.raises(InputError, match=r"network\.yaml: no such file"):
        render_tree(tmp_path / "jobs", tmp_path / "snapshot", tmp_path / "clusters.yaml", tmp_path)


def test_two_jobs_that_would_render_to_one_file_are_an_input_error(repo: Path) -> None:
    # No namespace of its own: on east-a it takes the cluster's, ml, where ml/alpha already is.
    (repo / "jobs/alpha-compact.yaml").write_text("name: alpha\nworkers: 1\ngpus_per_worker: 8\nclusters: [east-a]\n"
                                                  "image: ghcr.io/example/llm:1.0\n")
    with pytest.raises(InputError, match=r"renders to clusters/east-a/ml/alpha\.yaml, as does the job in"):
        render(repo)


def test_the_jobs_directory_may_not_hold_the_tree(repo: Path) -> None:
    with pytest.raises(InputError, match="must not contain one another"):
        render_tree(repo, repo / "snapshot", repo / "clusters.yaml", repo)


def test_check_fails_when_a_pinned_value_matches_no_node_of_the_snapshot(repo: Path) -> None:
    # The nodes carry GPU feature discovery's product name; the job pins the short name people often write.
    f, view = lab_fleet()
    gfd = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.count": "8"}
    write_snapshot(repo / "snapshot", replace(f, nodes=tuple(replace(n, labels=gfd) for n in f.nodes)), view)
    render(repo)
    assert check(repo) == ""  # the tree is what its inputs render to...
    alpha = repo / "jobs" / "alpha.yaml"
    pinned = "topology.kubernetes.io/region: r1\n        nvidia.com/gpu.product: A100"
    alpha.write_text(alpha.read_text().replace("topology.kubernetes.io/region: r1", pinned))
    render(repo)
    result = check_tree(repo / "jobs", repo / "snapshot", repo / "clusters.yaml", repo)
    assert result.up_to_date and not result.passed  # ...but its pods would find no node
    [line] = result.unmatched
    assert line.startswith("clusters/east-a/ml/alpha.yaml: Job/alpha spec.template.spec: ")
    assert "nvidia.com/gpu.product In [A100] matches no node (they carry NVIDIA-A100-SXM4-40GB)" in line
    run = gitops("check", *tree_args(repo))
    assert run.returncode == 1 and "no node of the snapshot admits these pods:" in run.stdout, run.stdout
    run = gitops("render", *tree_args(repo))
    assert run.returncode == 0 and "warning: no node of the snapshot admits clusters/east-a/ml/alpha.yaml" in run.stderr


def test_placed_jobs_reads_the_jobs_of_a_rendered_tree_and_refuses_anything_else(repo: Path) -> None:
    render(repo)
    expected = {"east-a": {("ml", "alpha")}, "west": {("default", "beta"), ("research", "gamma")}}
    assert placed_jobs(repo / INDEX) == expected
    (repo / "other.yaml").write_text("kind: Something\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"other\.yaml: kind: not a PlacementIndex"):
        placed_jobs(repo / "other.yaml")
    with pytest.raises(InputError, match="no such file"):
        placed_jobs(repo / "missing.yaml")


def test_a_jobs_own_argo_cd_sync_options_are_kept_beside_force_and_replace() -> None:
    from geosched.gitops.tree import ARGOCD_SYNC_OPTIONS, recreated_on_change

    job = {"kind": "Job", "metadata": {"annotations": {"geosched.io/cluster": "c",
                                                       ARGOCD_SYNC_OPTIONS: "Prune=false, Replace=false"}}}
    assert recreated_on_change(job)["metadata"]["annotations"][ARGOCD_SYNC_OPTIONS] == \
        "Prune=false,Force=true,Replace=true"
    service = {"kind": "Service", "metadata": {"name": "s"}}
    assert recreated_on_change(service) is service
