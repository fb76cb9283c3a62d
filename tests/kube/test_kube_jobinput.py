"""Reading job objects of each kind into the Job model, and the errors bad ones give."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kube_support import DATA

from geosched.core.errors import InputError
from geosched.kube.jobinput import parse_job_object, parse_job_text, read_job_file
from geosched.kube.kinds import batch, geosched_job, jobset, pytorchjob, trainjob


def load(name: str) -> dict:
    return yaml.safe_load((DATA / name).read_text())


def test_batch_job() -> None:
    parsed = read_job_file(DATA / "batch-job.yaml")
    assert parsed.kind is batch.KIND
    job = parsed.job
    assert (job.name, job.namespace, job.workers, job.gpus_per_worker) == ("llm-pretrain", "research", 4, 8)
    assert job.gpu == "A100-80GB"
    assert job.image == "ghcr.io/example/llm:1.0"
    assert parsed.pods == 4 and parsed.namespace == "research"
    assert parsed.original == load("batch-job.yaml")


def test_jobset_counts_replicas_times_parallelism_and_helpers() -> None:
    parsed = read_job_file(DATA / "jobset.yaml")
    assert parsed.kind is jobset.KIND
    assert (parsed.job.workers, parsed.job.gpus_per_worker, parsed.pods) == (4, 8, 5)
    assert parsed.job.gpu == "A100-80GB"  # both allowed products are the catalog's A100-80GB
    assert parsed.namespace is None and parsed.job.namespace == "default"
    assert [p.path for p in parsed.pod_sets] == [
        ("spec", "replicatedJobs", 0, "template", "spec", "template"),
        ("spec", "replicatedJobs", 1, "template", "spec", "template"),
    ]


def test_pytorchjob_master_plus_workers() -> None:
    parsed = read_job_file(DATA / "pytorchjob.yaml")
    assert parsed.kind is pytorchjob.KIND
    assert (parsed.job.workers, parsed.job.gpus_per_worker, parsed.pods) == (4, 8, 4)


def test_trainjob() -> None:
    parsed = read_job_file(DATA / "trainjob.yaml")
    assert parsed.kind is trainjob.KIND
    assert (parsed.job.workers, parsed.job.gpus_per_worker, parsed.job.image) == (4, 8, "ghcr.io/example/llama:1")
    assert parsed.pod_sets[0].path is None


def test_compact() -> None:
    parsed = read_job_file(DATA / "compact.yaml")
    assert parsed.kind is geosched_job.KIND and parsed.original is None
    assert (parsed.job.workers, parsed.job.gpus_per_worker, parsed.job.gpu) == (4, 8, "A100")
    assert parsed.pods == 4 and parsed.namespace is None


def test_multi_document_keeps_other_objects() -> None:
    parsed = read_job_file(DATA / "multi-doc.yaml")
    assert parsed.kind is batch.KIND and parsed.name == "llm-small"
    assert [e["kind"] for e in parsed.extras] == ["ConfigMap"]
    assert parsed.source.endswith("(document 2)")


def test_zone_and_region_limits_are_read_from_affinity() -> None:
    obj = load("batch-job.yaml")
    spec = obj["spec"]["template"]["spec"]
    spec["nodeSelector"]["topology.kubernetes.io/region"] = "us-east-1"
    spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In",
                               "values": ["use1-az1", "use1-az2"]}]},
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["use1-az4"]}]},
    ]}}}
    job = parse_job_object(obj, "job.yaml").job
    assert job.zones == ("use1-az1", "use1-az2", "use1-az4")
    assert job.regions == ("us-east-1",)


def test_a_term_without_the_key_leaves_it_unconstrained() -> None:
    obj = load("batch-job.yaml")
    obj["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]},
            {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]},
        ]}}}
    assert parse_job_object(obj, "job.yaml").job.zones == ()


def _error(obj: object, source: str = "job.yaml") -> InputError:
    with pytest.raises(InputError) as info:
        parse_job_object(obj, source)
    return info.value


def test_bad_gpu_count_names_the_field() -> None:
    obj = load("jobset.yaml")
    obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0]["resources"][
        "limits"]["nvidia.com/gpu"] = "500m"
    err = _error(obj)
    assert err.field == ('spec.replicatedJobs[1].template.spec.template.spec.containers[0].resources.limits'
                         '["nvidia.com/gpu"]')
    assert "whole number" in err.reason
    assert str(err).startswith("job.yaml: spec.replicatedJobs[1]")


def test_gpu_request_without_limit() -> None:
    obj = load("batch-job.yaml")
    resources = obj["spec"]["template"]["spec"]["containers"][0]["resources"]
    resources["requests"]["nvidia.com/gpu"] = resources["limits"].pop("nvidia.com/gpu")
    err = _error(obj)
    assert err.field == 'spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"]'
    assert "no limit" in err.reason


def test_not_indexed() -> None:
    obj = load("batch-job.yaml")
    del obj["spec"]["completionMode"]
    err = _error(obj)
    assert err.field == "spec.completionMode" and "Indexed" in err.reason


def test_a_jobset_without_completion_mode_is_indexed_as_its_webhook_defaults_it() -> None:
    # Upstream's own example (jobset-upstream-resnet.yaml: kubernetes-sigs/jobset examples/pytorch/resnet.yaml, a GPU
    # limit added) has no completionMode; JobSet's defaulting webhook makes it Indexed. A bare Job's stays NonIndexed.
    parsed = read_job_file(DATA / "jobset-upstream-resnet.yaml")
    assert parsed.kind is jobset.KIND and (parsed.job.workers, parsed.job.gpus_per_worker) == (4, 8)
    obj = load("jobset-upstream-resnet.yaml")
    obj["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] = "NonIndexed"
    err = _error(obj)
    assert err.field == "spec.replicatedJobs[0].template.spec.completionMode" and "got NonIndexed" in err.reason


def test_a_job_that_allows_only_a_pcie_card_names_no_catalog_model() -> None:
    # jobset.yaml allows the SXM and the PCIe A100 80GB (the catalog sells the SXM one); without the SXM one left,
    # the PCIe card is a real part but not the catalog's A100-80GB: one line, never a gang on SXM nodes.
    obj = load("jobset.yaml")
    expr = obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    expr["values"] = ["NVIDIA-A100-80GB-PCIe"]
    err = _error(obj)
    assert "allows only NVIDIA-A100-80GB-PCIe: not the catalog's A100-80GB (another form factor" in err.reason


def test_completions_must_equal_parallelism() -> None:
    obj = load("batch-job.yaml")
    obj["spec"]["completions"] = 8
    err = _error(obj)
    assert err.field == "spec.completions" and "parallelism" in err.reason


def test_no_gpus_at_all() -> None:
    obj = load("batch-job.yaml")
    del obj["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
    err = _error(obj)
    assert err.field == "spec" and "GPU" in err.reason


def test_uneven_gpus_across_pod_sets() -> None:
    obj = load("pytorchjob.yaml")
    obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["resources"]["limits"][
        "nvidia.com/gpu"] = 4
    err = _error(obj)
    assert err.field.startswith("spec.pytorchReplicaSpecs.") and "same number of GPUs" in err.reason


def test_unknown_pytorch_role() -> None:
    obj = load("pytorchjob.yaml")
    obj["spec"]["pytorchReplicaSpecs"]["Launcher"] = obj["spec"]["pytorchReplicaSpecs"]["Worker"]
    err = _error(obj)
    assert err.field == "spec.pytorchReplicaSpecs.Launcher"


def test_two_masters() -> None:
    obj = load("pytorchjob.yaml")
    obj["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    assert _error(obj).field == "spec.pytorchReplicaSpecs.Master.replicas"


def test_trainjob_needs_num_nodes() -> None:
    obj = load("trainjob.yaml")
    del obj["spec"]["trainer"]["numNodes"]
    assert _error(obj).field == "spec.trainer.numNodes"


def test_unknown_gpu_product() -> None:
    obj = load("batch-job.yaml")
    obj["spec"]["template"]["spec"]["nodeSelector"]["nvidia.com/gpu.product"] = "NVIDIA-Quantum-9000"
    err = _error(obj)
    assert err.field == "spec.template" and "NVIDIA-Quantum-9000" in err.reason


def test_two_gpu_models() -> None:
    obj = load("jobset.yaml")
    values = obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
    values.append("NVIDIA-H100-80GB-HBM3")
    assert "one GPU model" in _error(obj).reason


def test_wrong_type_names_the_path() -> None:
    obj = load("jobset.yaml")
    obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"] = {"name": "x"}
    err = _error(obj)
    assert err.field == "spec.replicatedJobs[0].template.spec.template.spec.containers"
    assert "expected a list" in err.reason


def test_bad_name() -> None:
    obj = load("batch-job.yaml")
    obj["metadata"]["name"] = "LLM_Pretrain"
    assert _error(obj).field == "metadata.name"


def test_generate_name_is_refused() -> None:
    obj = load("batch-job.yaml")
    obj["metadata"]["generateName"] = obj["metadata"].pop("name")
    err = _error(obj)
    assert err.field == "metadata.name" and "generateName" in err.reason


def test_unsupported_version() -> None:
    obj = load("jobset.yaml")
    obj["apiVersion"] = "jobset.x-k8s.io/v1alpha1"
    with pytest.raises(InputError) as info:
        parse_job_text(yaml.safe_dump(obj), "js.yaml")
    assert info.value.field == "apiVersion" and "not supported" in info.value.reason


def test_elastic_pytorchjob_is_refused() -> None:
    obj = load("pytorchjob.yaml")
    obj["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 4}
    assert _error(obj).field == "spec.elasticPolicy"


def test_stream_with_two_jobs_or_none(tmp_path: Path) -> None:
    two = (DATA / "batch-job.yaml").read_text() + "\n---\n" + (DATA / "pytorchjob.yaml").read_text()
    with pytest.raises(InputError, match="found 2 job objects"):
        parse_job_text(two, "two.yaml")
    with pytest.raises(InputError, match="no job object"):
        parse_job_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\napiVersion: v1\nkind: Secret\n"
                       "metadata: {name: y}\n", "cm.yaml")
    with pytest.raises(InputError, match="kind: unsupported object v1 ConfigMap \\(supported: batch/v1 Job"):
        parse_job_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "cm.yaml")
    with pytest.raises(InputError, match="no document"):
        parse_job_text("", "empty.yaml")


def test_invalid_yaml_names_the_line() -> None:
    with pytest.raises(InputError) as info:
        parse_job_text("apiVersion: batch/v1\nkind: [Job\n", "bad.yaml")
    assert info.value.field.startswith("line ")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_job_file(tmp_path / "nope.yaml")


def test_compact_errors_come_from_parse_job() -> None:
    data = load("compact.yaml")
    data["workers"] = 0
    err = _error(data, "compact.yaml")
    assert err.field == "workers"


def test_zero_gpu_replicas() -> None:
    obj = load("jobset.yaml")
    obj["spec"]["replicatedJobs"][1]["replicas"] = 0
    err = _error(obj)
    assert err.field == "spec" and "zero replicas" in err.reason
