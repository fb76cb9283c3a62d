"""GKE GPUDirect-TCPX / -TCPXO on compact jobs (issue 21 item 4): `pods.gpudirect`.

Nodes: GKE a3-highgpu-8g (nvidia-h100-80gb) and a3-megagpu-8g (nvidia-h100-mega-80gb) with the labels GKE sets
(tests/kubeapi/real_nodes.py); EKS p5.48xlarge as the EKS node controller labels it. The expected pod shapes are
those of GKE's page (cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-gpudirect-tcpx) and of the
manifests it deploys (GoogleCloudPlatform/container-engine-accelerators, gpudirect-tcpx/nccl-test-latest.yaml and
gpudirect-tcpxo/nccl-test-latest.yaml), cited in geosched/kube/gpudirect.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_support import DATA, K8S_VERSIONS, NOW, WORKLOAD_API_VERSIONS, make_placement, validate_manifest

from geosched.core.errors import InputError
from geosched.core.models import Assignment, Node
from geosched.files.decl import pods as pods_decl
from geosched.kube import gpudirect, podoptions
from geosched.kube.compact import CompactKind
from geosched.kube.config import ClusterConfig, parse_cluster_config
from geosched.kube.inventory import nodes_from_kube
from geosched.kube.jobinput import JobInput, read_job_file
from geosched.kube.render import RenderOptions, render, to_yaml
from tests.gitops.gitops_support import gitops, tree_args, write_inputs
from tests.kubeapi.real_nodes import eks_node, gke_node

Validate = Callable[[Mapping[str, Any]], None]
MEGA = ("a3-megagpu-8g", "nvidia-h100-mega-80gb")
HIGH = ("a3-highgpu-8g", "nvidia-h100-80gb")


def gke(suffix: str, machine: tuple[str, str]) -> dict[str, Any]:
    return gke_node(f"gke-ml-{machine[0][:9]}-5c2f3a1b-{suffix}", project="ml-prod", region="us-central1",
                    zone="us-central1-a", instance_type=machine[0], accelerator=machine[1], pool="a3")


def p5(ip: str) -> dict[str, Any]:
    return eks_node(ip, region="us-east-1", zone="us-east-1a", zone_id="use1-az4", instance_type="p5.48xlarge",
                    product="NVIDIA-H100-80GB-HBM3", instance_id=f"i-0{ip.replace('.', '')}", nodegroup="p5")


def config(pods: dict[str, Any] | None) -> ClusterConfig:
    body: dict[str, Any] = {"clusters": {"c": {"namespace": "ml", **({"pods": pods} if pods is not None else {})}}}
    return parse_cluster_config(body, "clusters.yaml")["c"]


def fleet(kube_nodes: list[dict[str, Any]]) -> dict[str, Node]:
    for node in kube_nodes:
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return {n.name: n for n in nodes_from_kube(kube_nodes, (), "c").nodes}


def manifests(kube_nodes: list[dict[str, Any]], cluster: ClusterConfig, *, job: JobInput | None = None,
              kind: CompactKind = CompactKind.JOB) -> list[dict[str, Any]]:
    nodes = fleet(kube_nodes)
    job = job or read_job_file(DATA / "compact.yaml")  # 4 workers x 8 GPUs
    first = next(iter(nodes.values()))
    placement = replace(make_placement(job.job), cluster=cluster.name, zones=(first.zone,),
                        assignments=tuple(Assignment(n, first.zone, 2) for n in nodes))
    return render(job, placement, cluster, RenderOptions(now=NOW, compact_kind=kind, nodes=nodes))


def worker_template(rendered: list[dict[str, Any]]) -> dict[str, Any]:
    obj = rendered[-1]
    if obj["kind"] == "JobSet":
        (replicated,) = obj["spec"]["replicatedJobs"]
        template: dict[str, Any] = replicated["template"]["spec"]["template"]
        return template
    template = obj["spec"]["template"]
    return template


def test_tcpxo_on_a3_mega_gets_the_documented_annotations_sidecar_volumes_and_env(validate: Validate) -> None:
    rendered = manifests([gke("x7k2", MEGA), gke("m4q9", MEGA)], config({"gpudirect": "tcpxo"}))
    template = worker_template(rendered)
    notes = template["metadata"]["annotations"]
    assert notes["networking.gke.io/default-interface"] == "eth0"
    assert json.loads(notes["networking.gke.io/interfaces"]) == [
        {"interfaceName": "eth0", "network": "default"},
        *({"interfaceName": f"eth{i}", "network": f"vpc{i}"} for i in range(1, 9))]
    assert yaml.safe_load(notes["devices.gke.io/container.tcpxo-daemon"]) == [
        *({"path": f"/dev/nvidia{i}"} for i in range(8)), {"path": "/dev/nvidiactl"}, {"path": "/dev/nvidia-uvm"},
        {"path": "/dev/dmabuf_import_helper"}]
    spec = template["spec"]
    (daemon,) = spec["initContainers"]
    assert daemon["name"] == "tcpxo-daemon" and daemon["restartPolicy"] == "Always"
    assert daemon["image"].startswith("us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:")
    assert daemon["securityContext"] == {"capabilities": {"add": ["NET_ADMIN", "NET_BIND_SERVICE"]}}
    assert "--num_nics=8" in daemon["args"][0] and "/fts/entrypoint_rxdm_container.sh" in daemon["args"][0]
    assert {(m["name"], m["mountPath"]) for m in daemon["volumeMounts"]} == {
        ("libraries", "/usr/local/nvidia/lib64"), ("sys", "/hostsysfs"), ("proc-sys", "/hostprocsysfs")}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["libraries"] == {"name": "libraries", "hostPath": {"path": "/home/kubernetes/bin/nvidia/lib64"}}
    assert volumes["aperture-devices"]["hostPath"] == {"path": "/dev/aperture_devices"}
    assert (volumes["sys"]["hostPath"], volumes["proc-sys"]["hostPath"]) == ({"path": "/sys"}, {"path": "/proc/sys"})
    (worker,) = spec["containers"]
    env = {e["name"]: e["value"] for e in worker["env"]}
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    assert env["NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"] == "/dev/aperture_devices"
    assert {"name": "aperture-devices", "mountPath": "/dev/aperture_devices"} in worker["volumeMounts"]
    assert {"name": "libraries", "mountPath": "/usr/local/nvidia/lib64"} in worker["volumeMounts"]
    assert worker["resources"]["limits"] == {"nvidia.com/gpu": 8}  # no EFA on GKE
    for obj in rendered:
        validate(obj)


def test_tcpx_on_a3_high_shares_the_daemons_socket_and_names_the_users_networks(validate: Validate) -> None:
    networks = ["gpu-nic-a", "gpu-nic-b", "gpu-nic-c", "gpu-nic-d"]
    cluster = config({"gpudirect": "tcpx", "gpudirect_networks": networks})
    rendered = manifests([gke("x7k2", HIGH), gke("m4q9", HIGH)], cluster, kind=CompactKind.JOBSET)
    assert rendered[-1]["kind"] == "JobSet"
    template = worker_template(rendered)
    notes = template["metadata"]["annotations"]
    assert [i["network"] for i in json.loads(notes["networking.gke.io/interfaces"])] == ["default", *networks]
    assert "/dev/dmabuf_import_helper" not in notes["devices.gke.io/container.tcpx-daemon"]
    spec = template["spec"]
    (daemon,) = spec["initContainers"]
    assert daemon["name"] == "tcpx-daemon" and daemon["restartPolicy"] == "Always"
    assert daemon["command"][:3] == ["/tcpgpudmarxd/build/app/tcpgpudmarxd", "--gpu_nic_preset", "a3vm"]
    assert daemon["securityContext"] == {"capabilities": {"add": ["NET_ADMIN"]}}
    assert {"name": "tcpx-socket", "mountPath": "/run/tcpx"} in daemon["volumeMounts"]
    assert {"name": "tcpx-socket", "emptyDir": {}} in spec["volumes"]
    (worker,) = spec["containers"]
    assert {"name": "tcpx-socket", "mountPath": "/tmp"} in worker["volumeMounts"]
    env = {e["name"]: e["value"] for e in worker["env"]}
    assert env["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"] == "eth1,eth2,eth3,eth4"
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    for obj in rendered:
        validate(obj)


def test_a_jobs_own_gpudirect_wins_and_its_file_is_named_when_refused(tmp_path: Path) -> None:
    text = (DATA / "compact.yaml").read_text(encoding="utf-8") + "pods:\n  gpudirect: tcpx\n"
    (tmp_path / "job.yaml").write_text(text, encoding="utf-8")
    job = read_job_file(tmp_path / "job.yaml")
    with pytest.raises(InputError) as caught:
        manifests([gke("x7k2", MEGA), gke("m4q9", MEGA)], config(None), job=job)
    message = str(caught.value)
    assert "job.yaml" in message and "pods.gpudirect" in message and "a3-highgpu-8g only" in message


@pytest.mark.parametrize(("kube_nodes", "pods", "reason"), [
    (lambda: [p5("10.0.1.10"), p5("10.0.1.11")], {"gpudirect": "tcpxo"}, "is not a GKE node"),
    (lambda: [gke("x7k2", HIGH), gke("m4q9", HIGH)], {"gpudirect": "tcpxo"}, "runs on a3-megagpu-8g only"),
    (lambda: [gke("x7k2", MEGA), gke("m4q9", HIGH)], {"gpudirect": "tcpxo"}, "runs on a3-megagpu-8g only"),
])
def test_gpudirect_where_gke_does_not_support_it_is_refused_in_one_line(
        kube_nodes: Callable[[], list[dict[str, Any]]], pods: dict[str, Any], reason: str) -> None:
    with pytest.raises(InputError) as caught:
        manifests(kube_nodes(), config(pods))
    message = str(caught.value)
    assert "cluster c" in message and "pods.gpudirect" in message and reason in message
    assert "\n" not in message


def test_a_worker_with_part_of_a_node_is_refused(tmp_path: Path) -> None:
    text = (DATA / "compact.yaml").read_text(encoding="utf-8").replace("gpus_per_worker: 8", "gpus_per_worker: 4")
    (tmp_path / "job.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match="all 8 GPUs of its node, not 4"):
        manifests([gke("x7k2", MEGA), gke("m4q9", MEGA)], config({"gpudirect": "tcpxo"}),
                  job=read_job_file(tmp_path / "job.yaml"))


def test_without_the_placed_nodes_gpudirect_is_refused() -> None:
    job = read_job_file(DATA / "compact.yaml")
    with pytest.raises(InputError, match="placed nodes are unknown"):
        render(job, replace(make_placement(job.job), cluster="c"), config({"gpudirect": "tcpx"}),
               RenderOptions(now=NOW))


def test_the_pods_declaration_names_the_stacks_gpudirect_renders() -> None:
    # geosched.files.decl.pods sits below kube (it cannot import gpudirect): its list of stacks is checked here.
    assert set(pods_decl.STACKS) == set(gpudirect.STACKS)
    assert pods_decl.schema("x")["properties"]["gpudirect"]["enum"] == list(gpudirect.STACKS)


@pytest.mark.parametrize(("pods", "field", "reason"), [
    ({"gpudirect": "rdma"}, "clusters.c.pods.gpudirect", "tcpx or tcpxo"),
    # Wrong types a hand-written file carries: a list or mapping (unhashable, once a TypeError traceback).
    ({"gpudirect": ["tcpx"]}, "clusters.c.pods.gpudirect", "tcpx or tcpxo, got ['tcpx']"),
    ({"gpudirect": {"stack": "tcpx"}}, "clusters.c.pods.gpudirect", "tcpx or tcpxo"),
    ({"gpudirect": "tcpx", "gpudirect_image": "example.com/rxdm\x1b[2J:v1"}, "clusters.c.pods.gpudirect_image",
     "image reference, got 'example.com/rxdm\\x1b[2J:v1'"),
    ({"gpudirect": "tcpxo", "gpudirect_networks": ["vpc1", "vpc2"]}, "clusters.c.pods.gpudirect_networks",
     "the 8 GPU NIC networks"),
    ({"gpudirect": "tcpx", "gpudirect_networks": ["a", "b", "c", "Bad_Name"]}, "clusters.c.pods.gpudirect_networks",
     "Network object names"),
    ({"gpudirect": "tcpx", "gpudirect_networks": ["a", "b", "c", "a"]}, "clusters.c.pods.gpudirect_networks",
     "each network once"),
    ({"gpudirect_networks": ["a", "b", "c", "d"]}, "clusters.c.pods.gpudirect_networks", "only with gpudirect"),
    ({"gpudirect": "tcpx", "gpudirect_image": "two words"}, "clusters.c.pods.gpudirect_image", "image reference"),
    ({"gpudirect": "tcpxo", "host_network": True}, "clusters.c.pods.host_network", "multi-networking"),
    ({"gpudirect": "tcpxo", "efa": 32}, "clusters.c.pods.efa", "cannot use both"),
])
def test_a_bad_gpudirect_option_is_one_line_naming_the_field(pods: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(InputError) as caught:
        config(pods)
    assert field in str(caught.value) and reason in str(caught.value) and "\n" not in str(caught.value)


def test_the_daemon_image_can_be_pinned_per_cluster() -> None:
    image = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.99"
    rendered = manifests([gke("x7k2", MEGA), gke("m4q9", MEGA)], config({"gpudirect": "tcpxo",
                                                                          "gpudirect_image": image}))
    assert worker_template(rendered)["spec"]["initContainers"][0]["image"] == image


def test_pod_options_without_gpudirect_keep_their_digest_form() -> None:
    # The inputs digest holds a cluster's pod options (config.cluster_to_dict): had the new keys been written for
    # every cluster, each job of every tree rendered before would be seen as changed and rewritten.
    plain = config({"priority_class": "training"}).pods
    assert set(podoptions.to_dict(plain)) == {"efa", "hugepages_2mi", "host_network", "shm", "shm_size", "cpu",
                                              "memory", "priority_class"}
    rendered = to_yaml(manifests([gke("x7k2", HIGH), gke("m4q9", HIGH)], config({"priority_class": "training"})))
    assert "networking.gke.io" not in rendered and "initContainers" not in rendered
    assert podoptions.to_dict(config({"gpudirect": "tcpx"}).pods)["gpudirect_networks"] == ["vpc1", "vpc2", "vpc3",
                                                                                            "vpc4"]


def test_gitops_render_refuses_gpudirect_off_gke_in_one_line_exit_2(tmp_path: Path) -> None:
    # A real `geosched gitops render` process over the lab fleet (synthetic nodes, no GKE labels).
    write_inputs(tmp_path)
    clusters = (tmp_path / "clusters.yaml").read_text(encoding="utf-8")
    gpudirect = ", pods: {gpudirect: tcpxo}}"
    (tmp_path / "clusters.yaml").write_text(clusters.replace("namespace: ml}", "namespace: ml" + gpudirect)
                                            .replace("{backend: coscheduling}", "{backend: coscheduling" + gpudirect),
                                            encoding="utf-8")
    run = gitops("render", *tree_args(tmp_path))
    assert run.returncode == 2, run.stdout + run.stderr
    [line] = run.stderr.strip().splitlines()
    assert "pods.gpudirect" in line and "is not a GKE node" in line and "cluster " in line
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("kind", list(CompactKind))
@pytest.mark.parametrize("backend", ["none", "kueue", "coscheduling", "volcano", "workload-api"])
def test_every_backend_and_compact_kind_carries_the_stack_and_passes_the_schemas(backend: str,
                                                                                kind: CompactKind) -> None:
    body: dict[str, Any] = {"clusters": {"c": {"namespace": "ml", "backend": backend, "pods": {"gpudirect": "tcpx"},
                                               **({"queue": "team-a"} if backend == "kueue" else {})}}}
    cluster = parse_cluster_config(body, "clusters.yaml")["c"]
    rendered = manifests([gke("x7k2", HIGH), gke("m4q9", HIGH)], cluster, kind=kind)
    template = worker_template(rendered)
    assert "networking.gke.io/interfaces" in template["metadata"]["annotations"]
    assert [c["name"] for c in template["spec"]["initContainers"]] == ["tcpx-daemon"]
    # The Workload API's pod field and objects exist from Kubernetes 1.36 on: checked against those schemas.
    versions = WORKLOAD_API_VERSIONS if backend == "workload-api" else K8S_VERSIONS
    for obj in rendered:
        validate_manifest(obj, versions)
