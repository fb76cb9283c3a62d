"""Manifests select real-labelled nodes: on every path geosched writes manifests (submit, GitOps, the demo's
hand-off, the committed examples), the pods' node constraints, asked of the API server as label selectors,
select the nodes the gang was placed on, on clusters whose nodes are shaped like real EKS and GKE GPU nodes
(tests/kubeapi/real_nodes.py) or carry the labels of the snapshot they were placed from."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from geosched import policies
from geosched.core.default_fleet import default_fleet, default_network
from geosched.core.models import LinkStats, Node, Placement
from geosched.demo.stages import handoff
from geosched.files.documents import load_fleet
from geosched.gitops import check_tree
from geosched.kube import keys
from geosched.kube.config import load_cluster_config
from geosched.kube.jobinput import load_job
from geosched.kube.submit import SubmitOptions, submit
from geosched.policies import PlacementContext
from geosched.store.db import Sample, Store
from tests.kubeapi.real_nodes import eks_us_east_1, gke_us_central1, pod_specs, seed, selected
from tests.kubeemu import MultiCluster, node_manifest, pod_manifest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "gitops"
CLUSTERS = ("eks-us-east-1", "gke-us-central1")


@pytest.fixture
def real(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MultiCluster]:
    """An EKS and a GKE cluster, each with GPU nodes as those platforms register them."""
    with MultiCluster(names=CLUSTERS, directory=tmp_path) as mc:
        monkeypatch.setenv("KUBECONFIG", str(mc.kubeconfig))
        seed(mc["eks-us-east-1"], eks_us_east_1())
        seed(mc["gke-us-central1"], gke_us_central1())
        yield mc
        for cluster in mc:
            assert cluster.server_errors == [], cluster.server_errors


def job_file(tmp_path: Path, cluster: str, gpu: str = "H100") -> Path:
    path = tmp_path / f"train-{cluster}.yaml"
    path.write_text(f"apiVersion: geosched.io/v1alpha1\nkind: Job\nname: train\nimage: ghcr.io/example/t:1\n"
                    f"workers: 2\ngpus_per_worker: 8\ngpu: {gpu}\nclusters: [{cluster}]\n", encoding="utf-8")
    return path


def gpu_specs(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    def asks_gpus(spec: Mapping[str, Any]) -> bool:
        return any(keys.GPU in ((c.get("resources") or {}).get("limits") or {}) for c in spec.get("containers", []))

    return [s for s in pod_specs(obj) if asks_gpus(s)]


def assigned(obj: Mapping[str, Any]) -> set[str]:
    text = obj["metadata"]["annotations"]["geosched.io/assignments"]
    return {item.split("=")[0] for item in text.split(",")}


def assert_selects_its_nodes(mc: MultiCluster, cluster: str, obj: Mapping[str, Any],
                             hostnames: Mapping[str, str] | None = None) -> set[str]:
    """Every GPU pod spec of `obj` selects every node the gang was placed on, and only nodes of its zones."""
    placed = {(hostnames or {}).get(n, n) for n in assigned(obj)}
    specs = gpu_specs(obj)
    assert specs, f"no GPU pod spec in {obj['kind']}"
    zones = {mc[cluster].get("v1/nodes", n)["metadata"]["labels"][keys.ZONE] for n in placed}
    with mc.api_client(cluster) as api:
        for spec in specs:
            chosen = selected(api, spec)
            assert placed <= chosen, f"{placed - chosen} placed but not selected by {spec.get('affinity')}"
            assert {mc[cluster].get("v1/nodes", n)["metadata"]["labels"][keys.ZONE] for n in chosen} == zones
    return placed


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_submit_pins_values_the_real_nodes_carry(real: MultiCluster, tmp_path: Path, cluster: str) -> None:
    outcome = submit(job_file(tmp_path, cluster), kubeconfig=real.kubeconfig, options=SubmitOptions())
    assert (outcome.status, outcome.cluster) == ("applied", cluster)
    obj = real[cluster].get("batch/v1/jobs", "train", "default")
    assert obj is not None
    assert_selects_its_nodes(real, cluster, obj)
    [spec] = gpu_specs(obj)
    [term] = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    pinned = {e["key"]: e["values"] for e in term["matchExpressions"]}
    # The zone as the nodes name it (EKS: the zone name, not the zone ID geosched keys the fleet by).
    assert pinned[keys.ZONE] == (["us-east-1a"] if cluster == "eks-us-east-1" else ["us-central1-c"])
    if keys.GPU_PRODUCT in pinned:
        assert pinned[keys.GPU_PRODUCT] == ["NVIDIA-H100-80GB-HBM3"]


@pytest.mark.parametrize("named", ["compact", "manifest"])
def test_submit_takes_the_eks_zone_name_its_nodes_carry(real: MultiCluster, tmp_path: Path, named: str) -> None:
    """Issue 21 item 10: `zones: [us-east-1b]` (or a manifest's nodeSelector on the zone name) against EKS nodes
    labelled us-east-1b / use1-az2 was a no-fit; it is the zone those nodes are in."""
    path = tmp_path / "named.yaml"
    if named == "compact":
        path.write_text("name: train\nimage: ghcr.io/example/t:1\nworkers: 2\ngpus_per_worker: 8\n"
                        "zones: [us-east-1b]\n", encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
            "spec": {"completionMode": "Indexed", "completions": 2, "parallelism": 2, "template": {"spec": {
                "restartPolicy": "Never", "nodeSelector": {keys.ZONE: "us-east-1b"},
                "containers": [{"name": "t", "image": "ghcr.io/example/t:1",
                                "resources": {"limits": {keys.GPU: 8}}}]}}}}), encoding="utf-8")
    outcome = submit(path, kubeconfig=real.kubeconfig, options=SubmitOptions(dry_run=True))
    assert (outcome.status, outcome.cluster, outcome.zones) == ("dry-run", "eks-us-east-1", ("use1-az2",))
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("name: train\nworkers: 2\ngpus_per_worker: 8\nzones: [us-east-1d]\n", encoding="utf-8")
    nofit = submit(unknown, kubeconfig=real.kubeconfig, options=SubmitOptions(dry_run=True))
    assert nofit.nofit is not None and len(nofit.nofit.reasons) == 1
    assert "AWS zones are keyed by zone ID" in nofit.nofit.message and "use1-az2, use1-az6" in nofit.nofit.message


def load_all(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(d, dict)]


def node_object(node: Node) -> dict[str, Any]:
    """A fleet node registered as the Node its snapshot describes: its labels and providerID as they are."""
    obj = node_manifest(node.name, region=node.region, zone=node.labels.get(keys.ZONE, node.zone), gpus=node.gpus)
    obj["metadata"]["labels"] = dict(node.labels)
    obj["spec"]["providerID"] = node.provider_id
    return obj


def placed_objects(path: Path) -> list[dict[str, Any]]:
    return [o for o in load_all(path) if "geosched.io/assignments" in (o["metadata"].get("annotations") or {})]


def test_the_committed_gitops_example_selects_the_nodes_of_its_snapshot(tmp_path: Path) -> None:
    # The snapshot's labels are those of real EKS and GKE nodes (tests/kube/test_node_labels.py); here the
    # committed manifests must select the nodes they were placed on, registered with exactly those labels.
    fleet = load_fleet(EXAMPLE / "snapshot" / "fleet.yaml")
    names = sorted(load_cluster_config(EXAMPLE / "clusters.yaml"))
    files = sorted((EXAMPLE / "clusters").glob("*/*/*.yaml"))
    assert len(files) == 4
    with MultiCluster(names=names, directory=tmp_path) as mc:
        seed_all = [(n.cluster, node_object(n)) for n in fleet.nodes if n.cluster in names]
        for cluster, obj in seed_all:
            mc[cluster].create(obj)
        for path in files:
            [obj] = placed_objects(path)
            assert_selects_its_nodes(mc, path.parts[-3], obj)


@pytest.mark.parametrize("example", ["train-8", "train-64", "train-512"])
def test_the_demo_handoff_selects_the_nodes_of_its_cluster(tmp_path: Path, example: str) -> None:
    # The embedded fleet's labels are those of real EKS and GKE nodes (tests/kube/test_node_labels.py).
    fleet = default_fleet()
    job = load_job(ROOT / "examples" / "jobs" / f"{example}.yaml")
    placement = policies.place(job, PlacementContext(fleet, default_network()))
    assert isinstance(placement, Placement) and placement.cluster is not None
    handoff(1, [placement], fleet, tmp_path / "out")
    [obj] = placed_objects(tmp_path / "out" / placement.cluster / job.namespace / f"{job.name}.yaml")
    with MultiCluster(names=[placement.cluster], directory=tmp_path) as mc:
        seed(mc[placement.cluster], [node_object(n) for n in fleet.nodes if n.cluster == placement.cluster])
        assert_selects_its_nodes(mc, placement.cluster, obj)


# --- snapshot export --from-clusters, then GitOps from it --------------------------------------------

CLUSTER_CONFIG = """\
apiVersion: geosched.io/v1alpha1
kind: ClusterConfig
clusters:
  eks-us-east-1: {context: eks-us-east-1, backend: kueue, queue: team-a, namespace: ml}
  gke-us-central1: {context: gke-us-central1, backend: coscheduling, namespace: ml}
"""
MEASURED = LinkStats(rtt_p50_ms=0.31, rtt_p95_ms=0.52, loss=0.0, throughput_gbps=42.0, samples=20)


def geosched(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "geosched", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd)


def gitops_repo(root: Path, real: MultiCluster) -> Path:
    """A GitOps repository whose snapshot is exported from the live clusters, one job per cluster."""
    (root / "clusters.yaml").write_text(CLUSTER_CONFIG, encoding="utf-8")
    (root / "jobs").mkdir(parents=True)
    for name, cluster, gpu in (("llm", "eks-us-east-1", "H100"), ("vision", "gke-us-central1", "H100")):
        (root / "jobs" / f"{name}.yaml").write_text(
            f"name: {name}\nworkers: 2\ngpus_per_worker: 8\ngpu: {gpu}\nclusters: [{cluster}]\n"
            "image: ghcr.io/example/llm:1.0\n", encoding="utf-8")
    home = root / "home"
    with Store(home) as store:
        # The store measured one zone's own links; every other zone pair comes from the shipped model.
        store.add_samples([Sample("zone", "use1-az6", "use1-az6", time.time(), MEASURED)])
    run = geosched("--home", str(home), "snapshot", "export", str(root / "snapshot"), "--from-clusters",
                   "--kubeconfig", str(real.kubeconfig), "--clusters", str(root / "clusters.yaml"))
    assert run.returncode == 0, run.stderr
    return root


def test_snapshot_export_from_clusters_reads_the_nodes_as_they_are(real: MultiCluster, tmp_path: Path) -> None:
    eks = real["eks-us-east-1"]
    # A running 8-GPU pod holds one p4d node; a finished one holds nothing.
    eks.add_namespace("ml")
    eks.create(pod_manifest("busy", "ml", node_name="ip-10-0-2-14.ec2.internal", phase="Running", gpus=8))
    eks.create(pod_manifest("done", "ml", node_name="ip-10-0-2-88.ec2.internal", phase="Succeeded", gpus=8))
    repo = gitops_repo(tmp_path, real)
    fleet = load_fleet(repo / "snapshot" / "fleet.yaml")
    nodes = fleet.by_name
    seeded = {n["metadata"]["name"]: n for n in (*eks_us_east_1(), *gke_us_central1())}
    assert set(nodes) == set(seeded)
    for name, node in nodes.items():
        assert dict(node.labels) == seeded[name]["metadata"]["labels"]  # labels as they are
        assert node.provider_id == seeded[name]["spec"]["providerID"]
    p5 = nodes["ip-10-0-1-23.ec2.internal"]
    # AWS: provider from the providerID, the zone ID (the catalog's key) from topology.k8s.aws/zone-id.
    assert (p5.provider, p5.region, p5.zone, p5.instance_type, p5.gpu, p5.cluster) == (
        "aws", "us-east-1", "use1-az6", "p5.48xlarge", "H100", "eks-us-east-1")
    assert (p5.price_ondemand, p5.price_spot) == (98.32, 25.3026)  # the catalog's p5.48xlarge in use1-az6
    assert (nodes["ip-10-0-2-14.ec2.internal"].gpus_free, nodes["ip-10-0-2-88.ec2.internal"].gpus_free) == (0, 8)
    gke = nodes["gke-train-central-h100-pool-5c2f3a1b-x7k2"]
    assert (gke.provider, gke.zone, gke.instance_type, gke.gpu, gke.price_ondemand) == (
        "gcp", "us-central1-c", "a3-highgpu-8g", "H100", 43.06615)
    network = yaml.safe_load((repo / "snapshot" / "network.yaml").read_text(encoding="utf-8"))
    zones = {(z["a"], z["b"]): z for z in network["zones"]}
    assert set(zones) == {(a, b) for a in fleet.zones for b in fleet.zones if a <= b}
    assert zones[("use1-az6", "use1-az6")]["samples"] == 20  # measured
    assert zones[("use1-az2", "use1-az6")]["samples"] == 0  # the shipped model


def test_a_gitops_tree_rendered_from_the_live_snapshot_selects_the_real_nodes(real: MultiCluster,
                                                                            tmp_path: Path) -> None:
    repo = gitops_repo(tmp_path, real)
    args = ["--jobs", "jobs", "--snapshot", "snapshot", "--clusters", "clusters.yaml", "--out", "."]
    run = geosched("gitops", "render", *args, cwd=repo)
    assert run.returncode == 0 and "2 placed, 0 unplaced" in run.stdout, run.stdout + run.stderr
    for cluster, job in (("eks-us-east-1", "llm"), ("gke-us-central1", "vision")):
        [obj] = placed_objects(repo / "clusters" / cluster / "ml" / f"{job}.yaml")
        assert_selects_its_nodes(real, cluster, obj)
    check = geosched("gitops", "check", *args, cwd=repo)
    assert (check.returncode, check.stdout) == (0, "the tree is up to date\n"), check.stdout


def test_snapshot_export_from_clusters_writes_nothing_when_a_cluster_cannot_be_read(real: MultiCluster,
                                                                                  tmp_path: Path) -> None:
    real["gke-us-central1"].inject(500, path=r"^/api/v1/nodes$", times=None)
    run = geosched("--home", str(tmp_path / "home"), "snapshot", "export", str(tmp_path / "snap"),
                   "--from-clusters", "--kubeconfig", str(real.kubeconfig))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "cannot read cluster gke-us-central1 (context gke-us-central1)" in run.stderr
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "snap").exists()


def test_the_scheduled_export_keeps_running_jobs_where_they_are(real: MultiCluster, tmp_path: Path) -> None:
    """The flow of examples/gitops/README.md: render, the jobs run, a fresh export, render again. With the tree's
    placements.yaml the export counts its own jobs' GPUs as theirs, and nothing moves; without it the jobs would
    compete with themselves."""
    repo = gitops_repo(tmp_path, real)
    args = ["--jobs", "jobs", "--snapshot", "snapshot", "--clusters", "clusters.yaml", "--out", "."]
    assert geosched("gitops", "render", *args, cwd=repo).returncode == 0
    for cluster, job in (("eks-us-east-1", "llm"), ("gke-us-central1", "vision")):
        [obj] = placed_objects(repo / "clusters" / cluster / "ml" / f"{job}.yaml")
        labels = obj["spec"]["template"]["metadata"]["labels"]
        real[cluster].add_namespace("ml")
        for i, node in enumerate(sorted(assigned(obj))):  # what the Job controller and scheduler would do
            real[cluster].create(pod_manifest(f"{job}-{i}", "ml", node_name=node, phase="Running", gpus=8,
                                              labels=labels))
    export = ["--home", str(tmp_path / "home"), "snapshot", "export", "snapshot", "--from-clusters",
              "--kubeconfig", str(real.kubeconfig), "--clusters", "clusters.yaml"]
    run = geosched(*export, "--placements", "placements.yaml", cwd=repo)
    assert run.returncode == 0, run.stderr
    # Only the index changes (the network's digest: its measurement is older now); no job moves.
    result = check_tree(repo / "jobs", repo / "snapshot", repo / "clusters.yaml", repo)
    assert (result.written, result.removed, result.unmatched) == (("placements.yaml",), (), ()), result.report()
    # Without the tree's placements the same export sees its jobs' nodes as busy: the jobs would move.
    assert geosched(*export, cwd=repo).returncode == 0
    result = check_tree(repo / "jobs", repo / "snapshot", repo / "clusters.yaml", repo)
    assert any(path.startswith("clusters/") for path in (*result.written, *result.removed)), result.report()


def test_the_example_snapshot_workflow_runs_on_live_clusters(real: MultiCluster, tmp_path: Path) -> None:
    """examples/gitops/.github/workflows/snapshot.yaml's own commands and arguments, against emulated clusters."""
    workflow = yaml.safe_load((EXAMPLE / ".github" / "workflows" / "snapshot.yaml").read_text(encoding="utf-8"))
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as true
    assert "schedule" in triggers and workflow["jobs"]["snapshot"]["permissions"] == {"contents": "write"}
    steps = " ".join(step.get("run", "") for step in workflow["jobs"]["snapshot"]["steps"])
    commands = ["geosched snapshot import snapshot", "geosched snapshot export snapshot $EXPORT_ARGS",
                'geosched gitops render $TREE_ARGS --at "$(git log -1 --format=%cI)"']
    assert all(c in steps for c in commands) and "git push" in steps
    env = workflow["env"]
    repo = gitops_repo(tmp_path, real)
    (repo / "gitops.yaml").write_text("apiVersion: geosched.io/v1alpha1\nkind: GitOpsConfig\n", encoding="utf-8")
    (repo / "kubeconfig").write_text(real.kubeconfig.read_text(encoding="utf-8"), encoding="utf-8")
    tree = env["TREE_ARGS"].split()
    assert geosched("gitops", "render", *tree, cwd=repo).returncode == 0
    home = ["--home", str(repo / env["GEOSCHED_HOME"])]
    for args in (["snapshot", "import", "snapshot"], ["snapshot", "export", "snapshot", *env["EXPORT_ARGS"].split()],
                 ["gitops", "render", *tree, "--at", "2025-03-01T13:00:00Z"]):
        run = geosched(*home, *args, cwd=repo)
        assert run.returncode == 0, f"{args}: {run.stderr}"
    for cluster, job in (("eks-us-east-1", "llm"), ("gke-us-central1", "vision")):
        [obj] = placed_objects(repo / "clusters" / cluster / "ml" / f"{job}.yaml")
        assert_selects_its_nodes(real, cluster, obj)
