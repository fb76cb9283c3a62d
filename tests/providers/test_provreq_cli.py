"""`geosched up JOB --cluster NAME --provisioning-class CLASS` on EKS (cluster-autoscaler's classes) and for GitOps
(`--out FILE`, with or without Kueue): the zone the node group plan ranks first among those the EKS cluster holds
(moto's EKS with real boto3, its subnets read as for a node group), by its name in this account, the job pinned
there by zone name and instance type; nothing is created in the cloud. The GKE side: test_nodepools_cli.py; on
the real control plane: tests/realkube/test_realkube_provreq.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from geosched.core.errors import EXIT_BAD_INPUT
from geosched.kube import keys, provreq
from geosched_emulators import Ec2FaultProxy, MotoServer
from tests.kube.kube_support import validate_manifest
from tests.kubeemu import MultiCluster
from tests.providers.eks_support import ZONES, EksCluster, make_cluster
from tests.providers.test_up_cli import run

pytestmark = pytest.mark.integration
CONSUMES = "autoscaling.x-k8s.io/consume-provisioning-request"


@pytest.fixture
def home(tmp_path: Path, proxy: Ec2FaultProxy) -> Path:
    return tmp_path / "home"


@pytest.fixture
def cluster(moto: MotoServer, proxy: Ec2FaultProxy) -> EksCluster:
    return make_cluster(moto.url, ("use1-az2", "use1-az6"))  # no subnet in use1-az1, the plan's first zone


def job(path: Path, workers: int = 2) -> Path:
    path.write_text("apiVersion: geosched.io/v1alpha1\nkind: Job\nname: train\nimage: ghcr.io/example/train:1\n"
                    f"workers: {workers}\ngpus_per_worker: 8\ngpu: A100\n", encoding="utf-8")
    return path


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def first_zone(home: Path, cluster: EksCluster) -> dict[str, Any]:
    plan = run(home, "provision", "--cluster", cluster.name, "--region", "us-east-1", "--gpu", "A100:8", "--nodes",
               "2", "--dry-run", "-o", "json")
    assert plan.exit_code == 0, plan.output
    first: dict[str, Any] = json.loads(plan.stdout)["items"][0]
    assert first["zone"] != "use1-az1"  # the cluster has no subnet there
    return first


def test_on_eks_the_job_is_pinned_to_the_plans_first_zone_by_name_and_instance_type(
        home: Path, cluster: EksCluster, tmp_path: Path) -> None:
    first = first_zone(home, cluster)
    result = run(home, "up", str(job(tmp_path / "train.yaml")), "--cluster", cluster.name, "--region", "us-east-1",
                 "--provisioning-class", provreq.BEST_EFFORT_ATOMIC, "--dry-run", "-o", "json")
    assert result.exit_code == 0, result.output
    outcome = json.loads(result.stdout)
    assert (outcome["status"], outcome["zones"]) == ("dry-run", [first["zone"]])
    k = {m["kind"]: m for m in outcome["manifests"]}
    assert k["ProvisioningRequestConfig"]["spec"]["provisioningClassName"] == provreq.BEST_EFFORT_ATOMIC
    pod = k["Job"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {keys.ZONE: ZONES[first["zone"]], keys.INSTANCE_TYPE: "p4d.24xlarge"}
    assert {"key": keys.GPU, "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert any(f"in {ZONES[first['zone']]} ({first['zone']})" in a for a in outcome["assumptions"])
    assert cluster.groups() == {}


@pytest.mark.parametrize("kueue", [True, False])
def test_out_writes_the_objects_for_gitops_and_applies_nothing(
        home: Path, cluster: EksCluster, tmp_path: Path, kueue: bool) -> None:
    first = first_zone(home, cluster)
    out = tmp_path / "gitops" / "train.yaml"
    out.parent.mkdir()
    # No kubeconfig exists: anything but writing the file would fail.
    result = run(home, "up", str(job(tmp_path / "train.yaml")), "--cluster", cluster.name, "--region", "us-east-1",
                 "--provisioning-class", provreq.CHECK_CAPACITY, "--out", str(out), "--kubeconfig",
                 str(tmp_path / "missing"), *(() if kueue else ("--without-kueue",)))
    assert result.exit_code == 0, result.output
    assert result.stdout == f"wrote {out}\n"
    assert "geosched created nothing" in result.stderr
    if kueue:  # the cluster's queue could not be read: the file carries the gang's own, and says so
        assert f"written with the gang's own quota: cluster {cluster.name} not read" in result.stderr
    objects = docs(out.read_text(encoding="utf-8"))
    for obj in objects:
        validate_manifest(obj)
    kinds = [o["kind"] for o in objects]
    if kueue:
        assert kinds == ["ResourceFlavor", "ProvisioningRequestConfig", "AdmissionCheck", "ClusterQueue",
                         "LocalQueue", "Job", "Service"]
    else:
        assert kinds == ["PodTemplate", "ProvisioningRequest", "Job", "Service"]
        request, job_obj = objects[1], objects[2]
        assert request["spec"]["provisioningClassName"] == provreq.CHECK_CAPACITY
        assert job_obj["spec"]["template"]["metadata"]["annotations"][CONSUMES] == request["metadata"]["name"]
    job_obj = next(o for o in objects if o["kind"] == "Job")
    assert job_obj["spec"]["template"]["spec"]["nodeSelector"][keys.ZONE] == ZONES[first["zone"]]
    assert cluster.groups() == {}


@pytest.mark.parametrize(("extra", "says"), [
    (("--provisioning-class", provreq.QUEUED_PROVISIONING), "is GKE's"),
    (("--without-kueue",), "--without-kueue: renders a ProvisioningRequest"),
    (("--out", "x.yaml"), "--out: writes what --karpenter or --provisioning-class renders"),
])
def test_what_eks_cannot_take_is_one_line(home: Path, cluster: EksCluster, tmp_path: Path, extra: tuple[str, ...],
                                          says: str) -> None:
    result = run(home, "up", str(job(tmp_path / "train.yaml")), "--cluster", cluster.name, "--region", "us-east-1",
                 *extra, "--dry-run")
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert says in str(result.exception) and "\n" not in str(result.exception)
    assert cluster.groups() == {}


# A batch/v1 Job as `kubectl create job --dry-run=client -o yaml` writes one, Indexed for a gang, asking for a GPU
# model by GPU feature discovery's label (NVIDIA k8s-device-plugin gpu-feature-discovery: nvidia.com/gpu.product).
BATCH_JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {{name: train}}
spec:
  completions: 2
  parallelism: 2
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {{nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}}
      containers:
      - name: main
        image: ghcr.io/example/train:1
        resources:
          limits: {{nvidia.com/gpu: 8, {resource}: {value}}}
"""


@pytest.mark.parametrize(("resource", "value", "says"), [
    # The ClusterQueue's quota sums every resource: a mapping raised ValueError (a traceback) quoting it.
    ("cpu", "{token: SUPERSECRETq}", "limits.cpu: expected a Kubernetes quantity such as 8, 500m or 64Gi, got a "
     "mapping"),
    # Rendered as a 1,000-digit quota, and a negative one, before.
    ("memory", '"9e999"', "limits.memory: must be at least 0 and at most 9223372036854775807"),
    ("memory", '"-5Gi"', "limits.memory: must be at least 0 and at most 9223372036854775807"),
], ids=["mapping", "huge", "negative"])
def test_a_resource_that_is_no_quantity_is_one_line(home: Path, cluster: EksCluster, tmp_path: Path, resource: str,
                                                    value: str, says: str) -> None:
    path = tmp_path / "train.yaml"
    path.write_text(BATCH_JOB.format(resource=resource, value=value), encoding="utf-8")
    result = run(home, "up", str(path), "--cluster", cluster.name, "--region", "us-east-1",
                 "--provisioning-class", provreq.BEST_EFFORT_ATOMIC, "--dry-run", "-o", "json")
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    message = str(result.exception)
    assert f"{path}: spec.template.spec.containers[0].resources.{says}" in message and "\n" not in message
    assert "SUPERSECRET" not in message + result.output


def test_out_names_a_path_with_control_characters_escaped(home: Path, cluster: EksCluster, tmp_path: Path) -> None:
    # A file name may hold any byte but / and NUL: an OSC sequence in it retitled the terminal on "wrote PATH".
    out = tmp_path / "train\x1b]0;owned\x07.yaml"
    result = run(home, "up", str(job(tmp_path / "train.yaml")), "--cluster", cluster.name, "--region", "us-east-1",
                 "--provisioning-class", provreq.CHECK_CAPACITY, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout == f"wrote {tmp_path}/train\\x1b]0;owned\\x07.yaml\n"
    assert out.exists()


def test_out_replaces_only_a_file_it_wrote(home: Path, cluster: EksCluster, tmp_path: Path) -> None:
    """`--out` is the option `--karpenter` shares, where it replaces only its own file: here it replaced whatever
    was at the path (attack5). `up train.yaml --provisioning-class ... --out train.yaml`, the job file itself, was
    overwritten by the rendered objects, and so was a hand-written manifest or a job `gitops render` wrote beside
    it in the GitOps tree. Now its own file (its first line) is replaced and anything else refused, one line,
    before any call, the file as it was."""
    job_file = job(tmp_path / "train.yaml")
    hand = tmp_path / "gitops" / "quota.yaml"
    hand.parent.mkdir()
    hand.write_text("apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: team}\nspec: {hard: {pods: '10'}}\n",
                    encoding="utf-8")
    link = tmp_path / "gitops" / "link.yaml"
    link.symlink_to(hand)

    def up(out: Path) -> Any:
        return run(home, "up", str(job_file), "--cluster", cluster.name, "--region", "us-east-1",
                   "--provisioning-class", provreq.CHECK_CAPACITY, "--out", str(out))

    for path, reason in ((job_file, "holds something `geosched up --provisioning-class` did not write"),
                         (hand, "holds something `geosched up --provisioning-class` did not write"),
                         (link, "is a link or not a regular file")):
        before = path.read_bytes()
        result = up(path)
        assert result.exit_code == EXIT_BAD_INPUT, result.output
        assert str(result.exception).startswith(f"--out: {path} {reason}"), result.exception
        assert "\n" not in str(result.exception)
        assert path.read_bytes() == before and link.is_symlink()
    mine = tmp_path / "gitops" / "train.yaml"
    assert up(mine).exit_code == 0
    text = mine.read_text(encoding="utf-8")
    assert up(mine).exit_code == 0  # its own file: replaced
    assert mine.read_text(encoding="utf-8") == text
    assert [d["kind"] for d in docs(text)][-2:] == ["Job", "Service"]


def test_out_leaves_a_cluster_queue_that_holds_the_gang_to_its_owner_and_never_lowers_one(
        home: Path, cluster: EksCluster, tmp_path: Path) -> None:
    """A GitOps sync makes the cluster what the file says: `--out` wrote the gang's own quota into the ClusterQueue,
    and the next sync set a quota its owner had raised to run more gangs back to this gang's. Now the cluster's
    queue is read: one that holds the gang is left out of a new file (its owner's), kept at the cluster's quota in a
    file that already carries it (else the sync's prune would delete it under the gang), one below the gang written
    with the cluster's quotas and the gang's raised to the gang's (`provreq.raised_queue`); the cluster unchanged."""
    (tmp_path / "gitops").mkdir()
    (tmp_path / "kube").mkdir()
    with MultiCluster(1, names=[cluster.name], directory=tmp_path / "kube") as kube:
        api = kube[cluster.name]

        def up(out: Path) -> tuple[Any, list[dict[str, Any]]]:
            result = run(home, "up", str(job(tmp_path / "train.yaml")), "--cluster", cluster.name, "--region",
                         "us-east-1", "--provisioning-class", provreq.CHECK_CAPACITY, "--out", str(out),
                         "--kubeconfig", str(kube.kubeconfig))
            assert result.exit_code == 0, result.output
            return result, docs(out.read_text(encoding="utf-8"))

        def gpu_quotas(queue: dict[str, Any]) -> dict[str, Any]:
            return {f["name"]: [(r["name"], r["nominalQuota"]) for r in f["resources"]]
                    for f in queue["spec"]["resourceGroups"][0]["flavors"]}

        synced = tmp_path / "gitops" / "train.yaml"
        result, objects = up(synced)  # no queue in the cluster yet: the rendered one, quota 2 x 8 GPUs
        [rendered] = [o for o in objects if o["kind"] == "ClusterQueue"]
        assert "ClusterQueue" not in result.stderr
        name = rendered["metadata"]["name"]
        assert gpu_quotas(rendered) == {name: [(keys.GPU, 16)]}
        path = f"{rendered['apiVersion']}/clusterqueues"

        # The sync applies the file; the owner then raises the GPU quota to 64 with kubectl.
        api.apply(rendered, field_manager="argocd-controller")
        owners = yaml.safe_load(yaml.safe_dump(rendered))
        owners["spec"]["resourceGroups"][0]["flavors"][0]["resources"] = [{"name": keys.GPU, "nominalQuota": 64}]
        api.apply(owners, field_manager="kubectl")
        result, objects = up(synced)  # the file carries the queue: kept, at the owner's 64
        [kept] = [o for o in objects if o["kind"] == "ClusterQueue"]
        assert gpu_quotas(kept) == {name: [(keys.GPU, 64)]}

        fresh = tmp_path / "gitops" / "train-b.yaml"
        result, objects = up(fresh)  # a new file: the cluster's queue holds the gang and is left to its owner
        assert [o["kind"] for o in objects] == ["ResourceFlavor", "ProvisioningRequestConfig", "AdmissionCheck",
                                                "LocalQueue", "Job", "Service"]
        assert f"ClusterQueue {name} left out of the file" in result.stderr

        # Lowered below the gang's (8 GPUs), and a flavor of the owner's added beside the gang's: written with the
        # gang's flavor raised to the gang's 16, the owner's flavor as the cluster holds it.
        group = owners["spec"]["resourceGroups"][0]
        group["flavors"][0]["resources"] = [{"name": keys.GPU, "nominalQuota": 8}]
        group["flavors"].append({"name": "reserved-h100", "resources": [{"name": keys.GPU, "nominalQuota": 32}]})
        api.apply(owners, field_manager="kubectl")
        result, objects = up(fresh)
        [written] = [o for o in objects if o["kind"] == "ClusterQueue"]
        assert gpu_quotas(written) == {name: [(keys.GPU, 16)], "reserved-h100": [(keys.GPU, 32)]}
        assert "none lowered" in result.stderr
        live = api.get(path, name)
        assert live is not None and live["spec"]["resourceGroups"] == owners["spec"]["resourceGroups"]
    assert cluster.groups() == {}


@pytest.mark.parametrize("quota", ["1e1000", "1.5e3.5"])
def test_out_with_a_live_quota_geosched_cannot_read_writes_the_gang_s_own_and_says_so(
        home: Path, cluster: EksCluster, tmp_path: Path, quota: str) -> None:
    """The cluster's ClusterQueue is the cluster's input (review finding of stop 36): a quota the emulated API server
    stores as given but geosched's quantity parser refuses ended `up --out` in a ValueError traceback and wrote no
    file. Now the file carries the gang's own queue and stderr says, in one line, why the cluster's was not used."""
    (tmp_path / "gitops").mkdir()
    (tmp_path / "kube").mkdir()
    with MultiCluster(1, names=[cluster.name], directory=tmp_path / "kube") as kube:
        def up(out: Path) -> Any:
            return run(home, "up", str(job(tmp_path / "train.yaml")), "--cluster", cluster.name, "--region",
                       "us-east-1", "--provisioning-class", provreq.CHECK_CAPACITY, "--out", str(out),
                       "--kubeconfig", str(kube.kubeconfig))
        first = tmp_path / "gitops" / "a.yaml"
        assert up(first).exit_code == 0
        [rendered] = [o for o in docs(first.read_text(encoding="utf-8")) if o["kind"] == "ClusterQueue"]
        owners = yaml.safe_load(yaml.safe_dump(rendered))
        owners["spec"]["resourceGroups"][0]["flavors"][0]["resources"] = [{"name": keys.GPU, "nominalQuota": quota}]
        kube[cluster.name].apply(owners, field_manager="kubectl")
        second = tmp_path / "gitops" / "b.yaml"
        result = up(second)
        assert result.exit_code == 0 and result.exception is None, result.output
        [written] = [o for o in docs(second.read_text(encoding="utf-8")) if o["kind"] == "ClusterQueue"]
        assert written["spec"] == rendered["spec"]
        [line] = [ln for ln in result.stderr.splitlines() if "could not be read" in ln]
        assert "Traceback" not in result.stderr and f"ClusterQueue {rendered['metadata']['name']}" in line
