"""Pod options (issue 21 item 4): what a compact job's workers ask for beyond GPUs, per cluster and per cloud.

Nodes: EKS p5.48xlarge and GKE a3-highgpu-8g as tests/realkube/nodes.py shapes them (labels from
tests/kubeapi/real_nodes.py; EFA counts from the EC2 user guide's EFA instance table, cited in
geosched/kube/podoptions.py), read by the inventory as submit reads them.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_support import DATA, NOW, make_placement

from geosched.core.errors import InputError
from geosched.core.models import Assignment
from geosched.kube.config import ClusterConfig, parse_cluster_config
from geosched.kube.inventory import nodes_from_kube
from geosched.kube.jobinput import read_job_file
from geosched.kube.podoptions import DEFAULT, efa_count
from geosched.kube.render import RenderOptions, render
from tests.kubeapi.real_nodes import eks_node, gke_node
from tests.realkube.nodes import kwok


def p5(ip: str) -> dict[str, Any]:
    return kwok(eks_node(ip, region="us-east-1", zone="us-east-1a", zone_id="use1-az4", instance_type="p5.48xlarge",
                         product="NVIDIA-H100-80GB-HBM3", instance_id=f"i-0{ip.replace('.', '')}",
                         nodegroup="p5-training"))


def a3(suffix: str) -> dict[str, Any]:
    return kwok(gke_node(f"gke-ml-a3-5c2f3a1b-{suffix}", project="ml-prod", region="us-central1",
                         zone="us-central1-a", instance_type="a3-highgpu-8g", accelerator="nvidia-h100-80gb",
                         pool="a3"))


def worker_spec(kube_nodes: list[dict[str, Any]], cluster: ClusterConfig) -> dict[str, Any]:
    for node in kube_nodes:
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    inventory = nodes_from_kube(kube_nodes, (), cluster.name)
    nodes = {n.name: n for n in inventory.nodes}
    job = read_job_file(DATA / "compact.yaml")  # 4 workers x 8 GPUs
    placement = replace(make_placement(job.job), cluster=cluster.name, zones=(inventory.nodes[0].zone,),
                        assignments=tuple(Assignment(n.name, n.zone, 2) for n in inventory.nodes))
    manifests = render(job, placement, cluster, RenderOptions(now=NOW, nodes=nodes))
    spec: dict[str, Any] = manifests[-1]["spec"]["template"]["spec"]
    return spec


def config(pods: dict[str, Any] | None = None) -> ClusterConfig:
    body: dict[str, Any] = {"clusters": {"c": {"namespace": "ml", **({"pods": pods} if pods is not None else {})}}}
    return parse_cluster_config(body, "clusters.yaml")["c"]


def test_a_compact_job_on_eks_p5_asks_for_all_32_efa_devices_and_a_memory_backed_shm() -> None:
    spec = worker_spec([p5("10.0.1.10"), p5("10.0.1.11")], config())
    (container,) = spec["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in spec["volumes"]
    assert "hostNetwork" not in spec and "priorityClassName" not in spec


def test_gke_a3_gets_no_efa_and_the_cluster_options_are_rendered() -> None:
    options = {"efa": "auto", "host_network": True, "shm_size": "64Gi", "cpu": "90", "memory": "800Gi",
               "hugepages_2mi": "5120Mi", "priority_class": "training"}
    spec = worker_spec([a3("x7k2"), a3("m4q9")], config(options))
    (container,) = spec["containers"]
    assert container["resources"] == {
        "limits": {"nvidia.com/gpu": 8, "hugepages-2Mi": "5120Mi"},
        "requests": {"cpu": "90", "memory": "800Gi", "hugepages-2Mi": "5120Mi"}}
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}} in spec["volumes"]
    assert spec["priorityClassName"] == "training"


def test_efa_and_shm_can_be_turned_off() -> None:
    spec = worker_spec([p5("10.0.1.10"), p5("10.0.1.11")], config({"efa": 0, "shm": "none"}))
    assert spec["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 8}}
    assert "volumes" not in spec


@pytest.mark.parametrize(("pods", "field", "reason"), [
    ({"efa": "all"}, "clusters.c.pods.efa", "auto or a count"),
    ({"efa": -1}, "clusters.c.pods.efa", "auto or a count"),
    ({"memory": "lots"}, "clusters.c.pods.memory", "quantity"),
    ({"shm": "disk"}, "clusters.c.pods.shm", "memory or none"),
    ({"host_network": "yes please"}, "clusters.c.pods.host_network", "true or false"),
    ({"hostNetwork": True}, "clusters.c.pods.hostNetwork", "unknown field"),
    # Of several unknown keys the first by name, whatever the file's order (the hand-written reader's line).
    ({"zz": 1, "aa": 2}, "clusters.c.pods.aa: unknown field", "known: cpu, efa"),
    # A null shm or host_network is refused (the declarations elsewhere read null as absent; these never did).
    ({"shm": None}, "clusters.c.pods.shm", "expected memory or none, got None"),
    ({"host_network": None}, "clusters.c.pods.host_network", "expected true or false, got None"),
    ("efa", "clusters.c.pods", "mapping"),
])
def test_a_bad_pod_option_is_one_line_naming_the_field(pods: Any, field: str, reason: str) -> None:
    with pytest.raises(InputError) as caught:
        config(pods)
    assert field in str(caught.value) and reason in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_config_file_form_parses() -> None:
    text = "clusters:\n  eks:\n    pods:\n      efa: 16\n      priority_class: training\n"
    cluster = parse_cluster_config(yaml.safe_load(text), "clusters.yaml")["eks"]
    assert (cluster.pods.efa, cluster.pods.priority_class) == (16, "training")


def test_behind_kueue_efa_is_asked_for_only_when_the_cluster_says_so() -> None:
    # Kueue admits a workload only if its ClusterQueue covers every resource the pods request.
    assert efa_count(DEFAULT, [("p5.48xlarge", 8)], 8, kueue=True) == 0
    assert efa_count(replace(DEFAULT, efa="auto"), [("p5.48xlarge", 8)], 8, kueue=True) == 32


def test_a_worker_of_half_a_p5_asks_for_half_its_efa_devices() -> None:
    assert efa_count(DEFAULT, [("p5.48xlarge", 8)], 4) == 16
    assert efa_count(DEFAULT, [("p5.48xlarge", 8), ("p4d.24xlarge", 8)], 8) == 4  # the fewest across types
    assert efa_count(DEFAULT, [("a3-highgpu-8g", 8)], 8) == 0
    assert efa_count(DEFAULT, [], 8) == 0


def test_the_readme_pod_options_example_is_a_valid_cluster_config() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if b.startswith("# clusters-pods.yaml")]
    pods = parse_cluster_config(yaml.safe_load(block), "README.md")["eks-us-east-1"].pods
    assert (pods.efa, pods.shm, pods.host_network, pods.priority_class) == ("auto", True, False, "training")
    gke = parse_cluster_config(yaml.safe_load(block), "README.md")["gke-us-central1"].pods
    assert (gke.gpudirect, len(gke.gpudirect_networks)) == ("tcpxo", 8)


def test_a_compact_jobs_own_pod_options_win_over_its_clusters(tmp_path: Path) -> None:
    text = (DATA / "compact.yaml").read_text(encoding="utf-8") + "pods:\n  efa: 8\n  priority_class: urgent\n"
    (tmp_path / "job.yaml").write_text(text, encoding="utf-8")
    job = read_job_file(tmp_path / "job.yaml")
    cluster = config({"priority_class": "training", "memory": "1Ti"})
    placement = replace(make_placement(job.job), cluster="c")
    spec = render(job, placement, cluster, RenderOptions(now=NOW))[-1]["spec"]["template"]["spec"]
    assert spec["priorityClassName"] == "urgent"
    assert spec["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 8},
                                                  "requests": {"memory": "1Ti"}}


def test_a_bad_pod_option_in_a_job_file_names_the_file_and_field(tmp_path: Path) -> None:
    text = (DATA / "compact.yaml").read_text(encoding="utf-8") + "pods:\n  efa: many\n"
    (tmp_path / "job.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_job_file(tmp_path / "job.yaml")
    message = str(caught.value)
    assert "job.yaml" in message and "pods.efa" in message and "\n" not in message
