"""Issue 21 item 2: tolerations a job file or a ClusterConfig declares, on real-shaped EKS and GKE GPU nodes
(tests/kubeapi/real_nodes.py) with the taints their docs give:

- EKS managed node groups carry no taint unless the user configures one on the node group; AWS's own recipe for
  keeping other pods off GPU nodes taints them `dedicated=gpuGroup:NoSchedule`
  (docs.aws.amazon.com/eks/latest/userguide/node-taints-managed-node-groups.html), and a common choice is
  `nvidia.com/gpu=true:NoSchedule`. EKS enables the ExtendedResourceToleration admission plugin on every platform
  version (docs.aws.amazon.com/eks/latest/userguide/platform-versions.html; since 1.19, aws/containers-roadmap#739),
  so GPU pods tolerate nvidia.com/gpu:NoSchedule whatever its value, and nothing else;
- GKE taints GPU pools `nvidia.com/gpu=present:NoSchedule` and runs the same plugin
  (cloud.google.com/kubernetes-engine/docs/how-to/gpus).

Such a node counts as capacity for submit and snapshot export only if the pods geosched writes tolerate it, and
every pod template geosched writes carries the declared tolerations, so the two never disagree."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_support import validate_manifest

from geosched.core.errors import InputError
from geosched.kube.cluster_inventory import ClusterReading, build_fleet, declared_tolerations
from geosched.kube.compact import CompactKind
from geosched.kube.config import ClusterConfig, load_cluster_config, parse_cluster_config
from geosched.kube.jobinput import JobInput, parse_job_text
from geosched.kube.objpath import At
from geosched.kube.scheduler.pods import Requirements, fits
from geosched.kube.submit import Planned, plan
from geosched.kube.tolerations import GPU_ADMISSION, Taint, Toleration, node_taints, of_pod_spec, tolerated, untolerated
from tests.kubeapi.real_nodes import eks_node, gke_node, seed
from tests.kubeemu import MultiCluster

Obj = dict[str, Any]
NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
AWS_RECIPE = {"key": "dedicated", "value": "gpuGroup", "effect": "NoSchedule"}
EKS_GPU = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
EKS_GPU_NOEXECUTE = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoExecute"}
GKE_GPU = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def eks_p5(*taints: dict[str, str]) -> list[Obj]:
    """Two p5.48xlarge nodes of one managed node group in us-east-1a (use1-az6), tainted as the node group is."""
    nodes = [eks_node(ip, region="us-east-1", zone="us-east-1a", zone_id="use1-az6", instance_type="p5.48xlarge",
                      product="NVIDIA-H100-80GB-HBM3", instance_id=iid, nodegroup="gpu-p5")
             for ip, iid in (("10.0.1.23", "i-0a99d3bb7b27d62ac"), ("10.0.1.57", "i-04f1c2e9b7d3a6158"))]
    for n in nodes:
        if taints:
            n["spec"]["taints"] = [dict(t) for t in taints]
    return nodes


def fleet_names(nodes: Sequence[Obj], declared: Sequence[Toleration] = ()) -> list[str]:
    view = build_fleet([ClusterReading("eks", tuple(nodes), ())], tolerations={"eks": tuple(declared)})
    return sorted(n.name for n in view.fleet.nodes)


def compact(extra: str = "") -> JobInput:
    return parse_job_text("apiVersion: geosched.io/v1alpha1\nkind: Job\nname: train\nimage: ghcr.io/example/t:1\n"
                          f"workers: 2\ngpus_per_worker: 8\ngpu: H100\n{extra}", "train.yaml")


def config(extra: str = "") -> dict[str, ClusterConfig]:
    return parse_cluster_config(yaml.safe_load(f"clusters:\n  eks:\n    context: eks\n{extra}"), "clusters.yaml")


# --- the one matcher: Kubernetes' ToleratesTaint ---------------------------------------------------------------

@pytest.mark.parametrize(("toleration", "taint", "ok"), [
    # An empty key with Exists tolerates every taint (kubernetes.io/docs/concepts/scheduling-eviction/
    # taint-and-toleration: "An empty key with operator Exists matches all keys, values and effects").
    (Toleration("", "Exists", "", ""), Taint("dedicated", "gpuGroup", "NoSchedule"), True),
    (Toleration("", "Exists", "", ""), Taint("node.kubernetes.io/unreachable", "", "NoExecute"), True),
    # An empty effect matches every effect.
    (Toleration("dedicated", "Equal", "gpuGroup", ""), Taint("dedicated", "gpuGroup", "NoExecute"), True),
    (Toleration("dedicated", "Equal", "gpuGroup", "NoSchedule"), Taint("dedicated", "gpuGroup", "NoExecute"), False),
    # Equal (also the default, operator "") needs the value; Exists any value of the key.
    (Toleration("dedicated", "", "gpuGroup", "NoSchedule"), Taint("dedicated", "gpuGroup", "NoSchedule"), True),
    (Toleration("dedicated", "Equal", "inference", "NoSchedule"), Taint("dedicated", "gpuGroup", "NoSchedule"), False),
    (Toleration("dedicated", "Exists", "", "NoSchedule"), Taint("dedicated", "anything", "NoSchedule"), True),
    (Toleration("dedicated", "Exists", "", "NoSchedule"), Taint("other", "gpuGroup", "NoSchedule"), False),
    # An operator Kubernetes does not know tolerates nothing.
    (Toleration("dedicated", "In", "gpuGroup", "NoSchedule"), Taint("dedicated", "gpuGroup", "NoSchedule"), False),
])
def test_the_matcher_is_kubernetes_tolerates_taint(toleration: Toleration, taint: Taint, ok: bool) -> None:
    assert tolerated([toleration], taint) is ok
    # The in-cluster scheduler and the MultiKueue dispatcher mask nodes by the same matcher.
    assert fits(Requirements(tolerations=(toleration,)), {}, (taint,)) is ok


def test_prefer_no_schedule_never_blocks() -> None:
    assert tolerated([], Taint("dedicated", "gpuGroup", "PreferNoSchedule"))


# --- the filter: EKS node groups ------------------------------------------------------------------------------

def test_an_eks_gpu_taint_with_no_schedule_is_tolerated_by_gpu_pods_as_eks_admission_does() -> None:
    assert len(fleet_names(eks_p5(EKS_GPU))) == 2


@pytest.mark.parametrize("taint", [AWS_RECIPE, EKS_GPU_NOEXECUTE])
def test_an_eks_node_group_taint_leaves_its_nodes_out_unless_declared_tolerated(taint: dict[str, str]) -> None:
    nodes = eks_p5(EKS_GPU, taint)
    assert fleet_names(nodes) == []
    job = compact(f"tolerations:\n  - {{key: {taint['key']}, operator: Equal, value: '{taint['value']}', "
                  f"effect: {taint['effect']}}}\n")
    assert len(fleet_names(nodes, job.tolerations)) == 2
    # The same from the cluster's config, for every job placed there.
    configs = config(f"    tolerations:\n      - {{key: {taint['key']}, operator: Exists}}\n")
    assert len(fleet_names(nodes, declared_tolerations(configs)["eks"])) == 2
    # A toleration of another effect or value does not.
    assert fleet_names(nodes, (Toleration(taint["key"], "Equal", "other", ""),)) == []


def test_a_gke_pool_tainted_for_inference_needs_a_declared_toleration() -> None:
    node = gke_node("gke-ml-central-h100-b-5c2f3a1b-t2w8", project="ml-platform-prod", region="us-central1",
                    zone="us-central1-b", instance_type="a3-highgpu-8g", accelerator="nvidia-h100-80gb", pool="h100-b")
    node["spec"]["taints"] = [GKE_GPU, {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}]
    reading = ClusterReading("gke", (node,), ())
    assert not build_fleet([reading]).fleet.nodes
    declared = {"gke": (Toleration("dedicated", "Equal", "inference", "NoSchedule"),)}
    assert build_fleet([reading], tolerations=declared).fleet.nodes


# --- submit: the nodes it counts are the nodes its pods may use ------------------------------------------------

def planned(job: JobInput, nodes: Sequence[Obj], configs: dict[str, ClusterConfig],
            kind: CompactKind = CompactKind.JOB) -> Planned:
    """As submit places and renders, on the fleet it reads with the tolerations it declares."""
    view = build_fleet([ClusterReading("eks", tuple(nodes), ())],
                       tolerations=declared_tolerations(configs, job.tolerations))
    result = plan(job, view, configs, now=NOW, compact_kind=kind)
    assert isinstance(result, Planned), result
    for manifest in result.manifests:  # as the API server (and the CRDs' schemas) take them
        validate_manifest(manifest)
    return result


def pod_specs(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        spec = value.get("spec")
        if isinstance(spec, dict) and "containers" in spec:
            return [spec]
        return [s for v in value.values() for s in pod_specs(v)]
    if isinstance(value, list):
        return [s for v in value for s in pod_specs(v)]
    return []


def assert_every_pod_tolerates(manifests: Sequence[Obj], nodes: Sequence[Obj]) -> None:
    """Every pod spec written tolerates every blocking taint of the nodes placed on (with the GPU toleration
    admission adds to GPU pods, as kube-scheduler would see them)."""
    specs = [s for m in manifests for s in pod_specs(m)]
    assert specs
    for spec in specs:
        own = (*of_pod_spec(At(spec, "pod")), GPU_ADMISSION)
        for node in nodes:
            assert untolerated(own, node_taints(node)) is None, (spec.get("tolerations"), node["spec"]["taints"])


@pytest.mark.parametrize("where", ["job", "cluster"])
def test_submit_places_on_a_tainted_eks_node_group_and_its_pods_carry_the_toleration(where: str) -> None:
    nodes = eks_p5(EKS_GPU, AWS_RECIPE)
    line = "{key: dedicated, operator: Equal, value: gpuGroup, effect: NoSchedule}"
    job = compact(f"tolerations:\n  - {line}\n" if where == "job" else "")
    configs = config(f"    tolerations:\n      - {line}\n" if where == "cluster" else "")
    result = planned(job, nodes, configs)
    assert result.placement.cluster == "eks"
    (obj,) = [m for m in result.manifests if m["kind"] == "Job"]
    assert obj["spec"]["template"]["spec"]["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "gpuGroup", "effect": "NoSchedule"}]
    assert_every_pod_tolerates(result.manifests, nodes)


def test_without_a_toleration_submit_finds_no_fit_and_says_which_taint() -> None:
    view = build_fleet([ClusterReading("eks", tuple(eks_p5(EKS_GPU, AWS_RECIPE)), ())])
    assert not view.fleet.nodes
    (first, _) = view.skipped
    assert "dedicated=gpuGroup:NoSchedule" in first.reason and "tolerations:" in first.reason


MANIFESTS = {
    "batch": """apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  completionMode: Indexed
  completions: 2
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      tolerations: [{key: team, operator: Exists, effect: NoSchedule}]
      containers: [{name: w, image: ghcr.io/example/t:1, resources: {limits: {nvidia.com/gpu: 8}}}]
""",
    "jobset": """apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: train}
spec:
  replicatedJobs:
    - name: workers
      replicas: 1
      template:
        spec:
          completionMode: Indexed
          completions: 2
          parallelism: 2
          template:
            spec:
              restartPolicy: Never
              tolerations: [{key: team, operator: Exists, effect: NoSchedule}]
              containers: [{name: w, image: ghcr.io/example/t:1, resources: {limits: {nvidia.com/gpu: 8}}}]
""",
    "pytorchjob": """apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: train}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          tolerations: [{key: team, operator: Exists, effect: NoSchedule}]
          containers: [{name: pytorch, image: ghcr.io/example/t:1, resources: {limits: {nvidia.com/gpu: 8}}}]
    Worker:
      replicas: 1
      template:
        spec:
          tolerations: [{key: team, operator: Exists, effect: NoSchedule}]
          containers: [{name: pytorch, image: ghcr.io/example/t:1, resources: {limits: {nvidia.com/gpu: 8}}}]
""",
}


@pytest.mark.parametrize("kind", sorted(MANIFESTS))
@pytest.mark.parametrize("backend", ["none", "kueue", "coscheduling", "volcano"])
def test_every_pod_template_of_a_manifest_carries_its_own_and_the_cluster_tolerations(kind: str,
                                                                                       backend: str) -> None:
    # The manifest's pods tolerate `team`; the cluster's config adds the node group's AWS-recipe taint.
    nodes = eks_p5(EKS_GPU, AWS_RECIPE, {"key": "team", "value": "ml", "effect": "NoSchedule"})
    job = parse_job_text(MANIFESTS[kind], "train.yaml")
    assert job.tolerations == (Toleration("team", "Exists", "", "NoSchedule"),)
    queue = "    queue: team-a\n" if backend == "kueue" else ""
    configs = config(f"    backend: {backend}\n{queue}    tolerations:\n      - {{key: dedicated, operator: Exists}}\n")
    result = planned(job, nodes, configs)
    specs = [s for m in result.manifests for s in pod_specs(m)]
    assert specs and all(s["tolerations"] == [{"key": "team", "operator": "Exists", "effect": "NoSchedule"},
                                               {"key": "dedicated", "operator": "Exists"}] for s in specs)
    assert_every_pod_tolerates(result.manifests, nodes)


def test_a_jobset_compact_job_carries_the_tolerations_too() -> None:
    nodes = eks_p5(AWS_RECIPE)
    job = compact("tolerations: [{key: dedicated, operator: Exists, effect: NoSchedule}]\n")
    result = planned(job, nodes, config(), CompactKind.JOBSET)
    (obj,) = [m for m in result.manifests if m["kind"] == "JobSet"]
    assert_every_pod_tolerates([obj], nodes)


def test_a_trainjob_gets_the_tolerations_on_its_node_override() -> None:
    text = """apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: train}
spec:
  runtimeRef: {name: torch-distributed}
  trainer: {numNodes: 2, image: ghcr.io/example/t:1, resourcesPerNode: {limits: {nvidia.com/gpu: 8}}}
  podSpecOverrides:
    - targetJobs: [{name: node}]
      tolerations: [{key: team, operator: Exists, effect: NoSchedule}]
"""
    nodes = eks_p5(AWS_RECIPE)
    job = parse_job_text(text, "train.yaml")
    configs = config("    tolerations: [{key: dedicated, operator: Equal, value: gpuGroup, effect: NoSchedule}]\n")
    result = planned(job, nodes, configs)
    (obj,) = [m for m in result.manifests if m["kind"] == "TrainJob"]
    own, ours = obj["spec"]["podSpecOverrides"]
    assert own["tolerations"] == [{"key": "team", "operator": "Exists", "effect": "NoSchedule"}]
    # Ours repeats the TrainJob's own, so they hold however Trainer combines overrides of one job.
    assert ours["tolerations"] == [{"key": "team", "operator": "Exists", "effect": "NoSchedule"},
                                   {"key": "dedicated", "operator": "Equal", "value": "gpuGroup",
                                    "effect": "NoSchedule"}]


def test_no_declared_toleration_leaves_the_rendered_manifests_as_before() -> None:
    # Digests of trees rendered before do not change, so no job of theirs is rewritten.
    nodes = eks_p5()
    before = planned(compact(), nodes, config()).manifests
    assert all("tolerations" not in s for m in before for s in pod_specs(m))


# --- the gate: one line naming file, field and reason ---------------------------------------------------------

@pytest.mark.parametrize(("text", "field", "reason"), [
    ("tolerations: {key: a}", "tolerations", "expected a list"),
    ("tolerations: [dedicated]", "tolerations[0]", "expected a mapping"),
    ("tolerations: [{key: a, effct: NoSchedule}]", "tolerations[0].effct", "unknown field"),
    ("tolerations: [{key: a, operator: In, value: b}]", "tolerations[0].operator", "Equal or Exists"),
    ("tolerations: [{operator: Equal, value: b}]", "tolerations[0].operator", "must be Exists when key is empty"),
    ("tolerations: [{key: a, operator: Exists, value: b}]", "tolerations[0].value", "must be empty"),
    ("tolerations: [{key: a, effect: NoSchedul}]", "tolerations[0].effect", "NoSchedule, PreferNoSchedule"),
    ("tolerations: [{key: a, effect: NoSchedule, tolerationSeconds: 60}]", "tolerations[0].tolerationSeconds",
     "only with effect NoExecute"),
    ("tolerations: [{key: a, effect: NoExecute, tolerationSeconds: soon}]", "tolerations[0].tolerationSeconds",
     "whole number"),
    ("tolerations: [{key: 'bad key', operator: Exists}]", "tolerations[0].key", "not a label key"),
    ("tolerations: [{key: a, value: 'no spaces'}]", "tolerations[0].value", "not a label value"),
    # A trailing newline slipped past `$` (which matches before one); the API server refuses it (audit find).
    ('tolerations: [{key: "a\\n", operator: Exists}]', "tolerations[0].key", "not a label key"),
    ('tolerations: [{key: a, value: "gpu\\n"}]', "tolerations[0].value", "not a label value"),
    # The hint names the spellings YAML reads as a boolean or a number, never one the user may not have written
    # (before: `value: yes` was told to write "true", `value: 010` to write "8").
    ("tolerations: [{key: a, value: true}]", "tolerations[0].value", "expected a string, got a boolean (True): "
     "YAML reads an unquoted yes, no, on, off, true or false (also Capitalised or UPPER) as a boolean; "
     "put the text in quotes"),
    ("tolerations: [{key: a, value: yes}]", "tolerations[0].value", "got a boolean (True): YAML reads an unquoted "
     "yes, no"),
    ("tolerations: [{key: a, value: 010}]", "tolerations[0].value", "got a number (8): YAML read the unquoted text "
     "as a number; put it in quotes as you wrote it"),
    # IsQualifiedName (k8s.io/apimachinery pkg/util/validation): the prefix is a DNS subdomain of at most 253.
    (f"tolerations: [{{key: {'a' * 254}/gpu, operator: Exists}}]", "tolerations[0].key",
     "the prefix before '/' has 254 characters (at most 253)"),
    (f"tolerations: [{{key: example.com/{'g' * 64}, operator: Exists}}]", "tolerations[0].key",
     "the name has 64 characters (at most 63)"),
    ("tolerations: [{key: /gpu, operator: Exists}]", "tolerations[0].key", "the prefix before '/' is empty"),
    ("tolerations: [{key: a/b/c, operator: Exists}]", "tolerations[0].key", "at most one '/'"),
    ("tolerations: [{key: Example.com/gpu, operator: Exists}]", "tolerations[0].key", "not a DNS subdomain"),
    # tolerationSeconds is an int64 in k8s.io/api core/v1.
    ("tolerations: [{key: a, operator: Exists, effect: NoExecute, tolerationSeconds: 9223372036854775808}]",
     "tolerations[0].tolerationSeconds", "does not fit the API's 64-bit integer"),
])
def test_a_bad_toleration_is_one_line_naming_the_field(text: str, field: str, reason: str) -> None:
    with pytest.raises(InputError) as job_error:
        compact(text + "\n")
    assert (job_error.value.source, job_error.value.field) == ("train.yaml", field)
    assert reason in job_error.value.reason and "\n" not in str(job_error.value)
    indented = "    " + text.replace("\n", "\n    ") + "\n"
    with pytest.raises(InputError) as config_error:
        config(indented)
    assert (config_error.value.source, config_error.value.field) == ("clusters.yaml", f"clusters.eks.{field}")


def test_a_good_toleration_reads_as_kubernetes_has_it() -> None:
    job = compact("tolerations:\n  - {key: nvidia.com/gpu, operator: Exists, effect: NoExecute, "
                  "tolerationSeconds: 3600}\n  - {operator: Exists}\n  - {key: dedicated, value: gpuGroup}\n")
    assert job.tolerations == (Toleration("nvidia.com/gpu", "Exists", "", "NoExecute", 3600),
                               Toleration("", "Exists", "", ""), Toleration("dedicated", "Equal", "gpuGroup", ""))


def test_the_longest_legal_key_and_seconds_are_accepted() -> None:
    """A 253-character DNS prefix, '/' and a 63-character name: 317 characters the API server accepts (before:
    refused by a cap of 316 on the whole key); tolerationSeconds up to the int64 maximum, and negative (the API
    reads it as 0: evict at once)."""
    prefix = ".".join(["a" * 63] * 3 + ["b" * 61])
    key = f"{prefix}/{'n' * 63}"
    assert (len(prefix), len(key)) == (253, 317)
    job = compact(f"tolerations:\n  - {{key: {key}, operator: Exists, effect: NoExecute, "
                  "tolerationSeconds: 9223372036854775807}\n"
                  "  - {key: a, operator: Exists, effect: NoExecute, tolerationSeconds: -1}\n")
    assert job.tolerations == (Toleration(key, "Exists", "", "NoExecute", 2**63 - 1),
                               Toleration("a", "Exists", "", "NoExecute", -1))


# --- end to end: `geosched kube submit` and `geosched snapshot export` on an emulated EKS cluster ---------------

@pytest.fixture
def eks_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MultiCluster]:
    """One EKS cluster whose p5 node group is tainted as AWS's recipe and a common GPU setup do."""
    with MultiCluster(names=("eks",), directory=tmp_path) as mc:
        monkeypatch.setenv("KUBECONFIG", str(mc.kubeconfig))
        seed(mc["eks"], eks_p5(EKS_GPU, AWS_RECIPE))
        yield mc


def files(tmp_path: Path, cluster_extra: str = "", job_extra: str = "") -> tuple[Path, Path]:
    job = tmp_path / "train.yaml"
    job.write_text("apiVersion: geosched.io/v1alpha1\nkind: Job\nname: train\nimage: ghcr.io/example/t:1\n"
                   f"workers: 2\ngpus_per_worker: 8\ngpu: H100\n{job_extra}", encoding="utf-8")
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text(f"clusters:\n  eks:\n    context: eks\n{cluster_extra}", encoding="utf-8")
    return job, clusters


@pytest.mark.integration
def test_submit_counts_a_tainted_node_group_only_when_the_config_tolerates_it(eks_cluster: MultiCluster,
                                                                             tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from geosched.kube.cli import app

    runner = CliRunner()
    job, clusters = files(tmp_path)
    refused = runner.invoke(app, ["submit", str(job), "--dry-run", "--clusters", str(clusters)])
    assert refused.exit_code == 3, refused.output
    assert "dedicated=gpuGroup:NoSchedule" in refused.stderr
    job, clusters = files(tmp_path, "    tolerations: [{key: dedicated, operator: Equal, value: gpuGroup, "
                                    "effect: NoSchedule}]\n")
    placed = runner.invoke(app, ["submit", str(job), "--dry-run", "--clusters", str(clusters)])
    assert placed.exit_code == 0, placed.output
    (obj,) = [d for d in yaml.safe_load_all(placed.stdout) if d["kind"] == "Job"]
    assert_every_pod_tolerates([obj], eks_p5(EKS_GPU, AWS_RECIPE))
    # The job file's own `tolerations:` do the same.
    job, clusters = files(tmp_path, job_extra="tolerations: [{key: dedicated, operator: Exists}]\n")
    assert runner.invoke(app, ["submit", str(job), "--dry-run", "--clusters", str(clusters)]).exit_code == 0


@pytest.mark.integration
def test_a_bad_toleration_in_the_cluster_config_is_exit_2_one_line(eks_cluster: MultiCluster, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from geosched.kube.cli import app

    job, clusters = files(tmp_path, "    tolerations: [{key: dedicated, operator: Exists, value: gpuGroup}]\n")
    result = CliRunner().invoke(app, ["submit", str(job), "--dry-run", "--clusters", str(clusters)])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {clusters}: clusters.eks.tolerations[0].value: must be empty with operator Exists"]


@pytest.mark.integration
def test_snapshot_export_keeps_the_node_group_its_cluster_config_tolerates(eks_cluster: MultiCluster,
                                                                           tmp_path: Path) -> None:
    from geosched.kube.cluster_inventory import snapshot

    _, plain = files(tmp_path)
    view, _ = snapshot(clusters=load_cluster_config(plain))
    assert not view.fleet.nodes and all("dedicated=gpuGroup:NoSchedule" in r.reason for r in view.skipped)
    _, tolerant = files(tmp_path, "    tolerations: [{key: dedicated, operator: Exists, effect: NoSchedule}]\n")
    view, _ = snapshot(clusters=load_cluster_config(tolerant))
    assert len(view.fleet.nodes) == 2


def test_the_readme_examples_read_as_they_say(tmp_path: Path) -> None:
    import re

    from geosched.kube.jobinput import read_job_file

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    found = {}
    for block in re.findall(r"```yaml\n(# (\S+-tolerations\.yaml)\n.*?)```", readme, re.S):
        (tmp_path / block[1]).write_text(block[0], encoding="utf-8")
        found[block[1]] = tmp_path / block[1]
    (cluster,) = load_cluster_config(found["clusters-tolerations.yaml"]).values()
    assert cluster.tolerations == (Toleration("dedicated", "Equal", "gpuGroup", "NoSchedule"),)
    job = read_job_file(found["train-tolerations.yaml"])
    assert job.tolerations == (Toleration("maintenance", "Exists", "", "NoExecute", 3600),)


def test_the_in_cluster_scheduler_lets_the_rendered_pods_onto_the_tainted_node_group() -> None:
    # The pods render wrote, as kube-scheduler's stand-in reads them (its own tolerations, no admission plugin).
    from geosched.kube.cluster_inventory import fleet_from_nodes, network_for
    from geosched.kube.inventory import nodes_from_kube
    from geosched.kube.scheduler.decide import View
    from geosched.kube.scheduler.pods import node_labels, pod_info
    from geosched.policies import PlacementContext

    nodes = eks_p5(AWS_RECIPE)
    fleet, _, _ = fleet_from_nodes(nodes_from_kube(nodes, (), "eks").nodes)
    ctx = PlacementContext(fleet, network_for(fleet))
    raw = {n["metadata"]["name"]: n for n in nodes}
    view = View(ctx, ctx.gpus_free.copy(), [node_labels(raw[n.name]) for n in fleet.nodes],
                [node_taints(raw[n.name]) for n in fleet.nodes])

    def usable(configs: dict[str, ClusterConfig], tolerations: Sequence[Toleration]) -> int:
        declared = {"eks": tuple(tolerations)}
        placement = plan(compact(), build_fleet([ClusterReading("eks", tuple(nodes), ())], tolerations=declared),
                         configs, now=NOW)
        assert isinstance(placement, Planned)
        (obj,) = [m for m in placement.manifests if m["kind"] == "Job"]
        pod = pod_info({"metadata": {"name": "train-0", "namespace": "default", "uid": "u0"},
                        "spec": obj["spec"]["template"]["spec"], "status": {"phase": "Pending"}})
        return int(view.mask(pod.requirements).sum())

    tolerant = config("    tolerations: [{key: dedicated, operator: Exists}]\n")
    assert usable(tolerant, tolerant["eks"].tolerations) == 2
    # Counted as capacity without rendering the toleration (what this issue fixed), the pods could use none.
    assert usable(config(), tolerant["eks"].tolerations) == 0
