"""`geosched provision --cluster NAME --karpenter` and `geosched up JOB --cluster NAME --karpenter`: a Karpenter
NodePool + EC2NodeClass (and the job pinned to it) rendered for GitOps in the zone the plan chose, from the EKS
cluster read on moto (real boto3), through the CLI as a user runs it. Nothing is created."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from geosched.core.errors import EXIT_BAD_INPUT, InputError
from geosched_emulators import Ec2FaultProxy, MotoServer
from tests.kube.kube_support import validate_manifest
from tests.providers.eks_support import ZONES, EksCluster, make_cluster
from tests.providers.test_up_cli import run

pytestmark = pytest.mark.integration


@pytest.fixture
def home(tmp_path: Path, proxy: Ec2FaultProxy) -> Path:
    return tmp_path / "home"


@pytest.fixture
def cluster(moto: MotoServer, proxy: Ec2FaultProxy) -> EksCluster:
    return make_cluster(moto.url, ("use1-az2", "use1-az6"))  # no subnet in use1-az1, the plan's first zone


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def requirement(np: dict[str, Any], key: str) -> list[str]:
    [values] = [r["values"] for r in np["spec"]["template"]["spec"]["requirements"] if r["key"] == key]
    return list(values)


@pytest.mark.parametrize("market", ["--on-demand", "--spot"])
def test_provision_renders_a_pool_per_zone_the_cluster_holds_weighted_in_plan_order(home: Path, cluster: EksCluster,
                                                                                     market: str) -> None:
    args = ("provision", "--cluster", cluster.name, "--region", "us-east-1", "--gpu", "A100:8", "--nodes", "2",
            "--karpenter", market)
    plan = run(home, *args, "--dry-run", "-o", "json")
    assert plan.exit_code == 0, plan.output
    items = json.loads(plan.stdout)["items"]
    first = items[0]
    # The zones of the plan's rows in plan order, each once (a zone may hold several rows).
    zone_order = list(dict.fromkeys(i["zone_name"] for i in items))
    assert len(zone_order) == 2  # the cluster's two zones
    result = run(home, *args, "--name", "kp-gang")
    assert result.exit_code == 0, result.output
    objects = docs(result.stdout)
    for obj in objects:
        validate_manifest(obj)
    assert [o["kind"] for o in objects] == ["EC2NodeClass", "NodePool"] * 2
    cls, np = objects[:2]
    assert [o["metadata"]["name"] for o in objects] == ["kp-gang-1", "kp-gang-1", "kp-gang-2", "kp-gang-2"]
    # The plan's first zone the cluster has a subnet in (never use1-az1: no subnet there), by its name in this
    # account.
    assert first["zone"] != "use1-az1"
    assert requirement(np, "topology.kubernetes.io/zone") == [ZONES[first["zone"]]] == [first["zone_name"]]
    # Each zone once, in plan order, weighted so Karpenter tries them in that order (higher first).
    pools = objects[1::2]
    assert [requirement(p, "topology.kubernetes.io/zone") for p in pools] == [[z] for z in zone_order]
    assert [p["spec"]["weight"] for p in pools] == [100, 99]
    assert [p["spec"]["template"]["spec"]["nodeClassRef"]["name"] for p in pools] == ["kp-gang-1", "kp-gang-2"]
    assert requirement(np, "node.kubernetes.io/instance-type") == ["p4d.24xlarge"]
    assert requirement(np, "karpenter.sh/capacity-type") == [market.removeprefix("--")]
    assert np["spec"]["limits"] == {"nvidia.com/gpu": "16"}
    assert cls["spec"]["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": cluster.name}}]
    # No --node-role and no $GEOSCHED_EKS_NODE_ROLE: the role Karpenter's getting-started guide creates.
    assert cls["spec"]["role"] == f"KarpenterNodeRole-{cluster.name}"
    assert (f"NodePool kp-gang-1: 2 x p4d.24xlarge {market.removeprefix('--')} in {first['zone_name']} "
            f"({first['zone']}, cluster {cluster.name}), ${first['usd_per_hour']:,.2f}/h") in result.stderr
    assert f"Karpenter tries kp-gang-2 in {zone_order[1]}" in result.stderr
    assert cluster.groups() == {}  # nothing created
    # --zones 1: the first zone alone, as before failover.
    one = run(home, *args, "--name", "kp-gang", "--zones", "1")
    assert one.exit_code == 0, one.output
    assert [o["metadata"]["name"] for o in docs(one.stdout)] == ["kp-gang-1", "kp-gang-1"]
    assert docs(one.stdout)[1] == {**np, "spec": {**np["spec"], "weight": 100}}


def test_up_writes_the_pool_and_the_job_pinned_to_it(home: Path, cluster: EksCluster, tmp_path: Path) -> None:
    job = tmp_path / "train.yaml"
    job.write_text("apiVersion: geosched.io/v1alpha1\nkind: Job\nname: train\nimage: ghcr.io/example/train:1\n"
                   "workers: 2\ngpus_per_worker: 8\ngpu: A100\n", encoding="utf-8")
    out = tmp_path / "gitops" / "karpenter.yaml"
    out.parent.mkdir()
    result = run(home, "up", str(job), "--cluster", cluster.name, "--region", "us-east-1", "--karpenter", "--out",
                 str(out), "--name", "kp-up", "--ami", "bottlerocket", "--expire-after", "168h", "--node-role",
                 "arn:aws:iam::123456789012:role/eks/KarpenterNodeRole-ml")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"wrote {out}\n"
    objects = docs(out.read_text(encoding="utf-8"))
    assert [o["kind"] for o in objects] == ["EC2NodeClass", "NodePool"] * 2 + ["Service", "Job"]
    for obj in objects:
        validate_manifest(obj)
    cls, np, _, _, _, job_obj = objects
    assert cls["spec"]["amiSelectorTerms"] == [{"alias": "bottlerocket@latest"}]
    assert cls["spec"]["role"] == "KarpenterNodeRole-ml"
    assert np["spec"]["template"]["spec"]["expireAfter"] == "168h"
    pod = job_obj["spec"]["template"]
    [term] = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["kp-up-1", "kp-up-2"]} \
        in term["matchExpressions"]
    # The whole gang in the zone of its first pod, whichever pool launches.
    assert pod["metadata"]["labels"]["geosched.io/gang"] == "kp-up"
    assert pod["spec"]["affinity"]["podAffinity"] == {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"geosched.io/gang": "kp-up"}},
         "topologyKey": "topology.kubernetes.io/zone"}]}
    assert pod["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
    # No placement provenance: `geosched jobs` does not list it, so no job row charges it (report/METHODOLOGY.md).
    assert "geosched.io/cluster" not in (job_obj["metadata"].get("annotations") or {})
    assert cluster.groups() == {}


def test_up_takes_the_namespace_of_the_cluster_config(home: Path, cluster: EksCluster, tmp_path: Path) -> None:
    job = tmp_path / "train.yaml"
    job.write_text("name: train\nimage: ghcr.io/example/train:1\nworkers: 2\ngpus_per_worker: 8\ngpu: A100\n",
                   encoding="utf-8")
    config = tmp_path / "clusters.yaml"
    config.write_text(f"clusters:\n  {cluster.name}:\n    context: eks-east\n    namespace: research\n",
                      encoding="utf-8")
    result = run(home, "up", str(job), "--cluster", cluster.name, "--region", "us-east-1", "--karpenter",
                 "--clusters", str(config), "--context", "eks-east")
    assert result.exit_code == 0, result.output
    objects = docs(result.stdout)
    assert [(o["kind"], o["metadata"].get("namespace")) for o in objects] == [
        ("EC2NodeClass", None), ("NodePool", None)] * 2 + [("Service", "research"), ("Job", "research")]


def test_up_warns_of_a_selector_no_node_of_the_pool_carries(home: Path, cluster: EksCluster, tmp_path: Path) -> None:
    job = tmp_path / "train.yaml"
    job.write_text("""apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: research}
spec:
  completionMode: Indexed
  completions: 2
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB, team.example.com/pool: nlp}
      containers:
        - name: trainer
          image: ghcr.io/example/llm:1.0
          resources: {limits: {nvidia.com/gpu: 8}}
""", encoding="utf-8")
    result = run(home, "up", str(job), "--cluster", cluster.name, "--region", "us-east-1", "--karpenter")
    assert result.exit_code == 0, result.output
    assert [o["kind"] for o in docs(result.stdout)] == ["EC2NodeClass", "NodePool"] * 2 + ["Job"]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, result.stderr
    assert warnings[0].startswith("warning: Job/train spec.template: team.example.com/pool is not a label the pool's "
                                  "nodes are known to carry; Karpenter will launch no node of pool ")


def test_dry_run_shows_the_plan(home: Path, cluster: EksCluster, tmp_path: Path) -> None:
    result = run(home, "provision", "--cluster", cluster.name, "--region", "us-east-1", "--gpu", "A100:8",
                 "--nodes", "2", "--karpenter", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "nothing was created" in result.output
    assert "apiVersion" not in result.stdout
    job = tmp_path / "train.yaml"
    job.write_text("name: train\nimage: ghcr.io/example/train:1\nworkers: 2\ngpus_per_worker: 8\ngpu: A100\n",
                   encoding="utf-8")
    out = tmp_path / "train-karpenter.yaml"
    up = run(home, "up", str(job), "--cluster", cluster.name, "--region", "us-east-1", "--karpenter", "--out",
             str(out), "--dry-run", "-o", "json")
    assert up.exit_code == 0, up.output
    assert [i["zone"] for i in json.loads(up.stdout)["items"]] == ["use1-az2", "use1-az6"]
    assert not out.exists()  # a dry run writes nothing


@pytest.mark.parametrize(("args", "message"), [
    (("--provider", "gcp", "--region", "us-central1"), "error: --karpenter: a Karpenter EC2NodeClass is for EKS"),
    (("--node-role", "role with spaces"), "error: --node-role: expected an IAM role name"),
    (("--expire-after", "30d"), "error: --expire-after: expected a duration"),
    (("--ami", "ubuntu"), "error: --ami: expected one of al2023, bottlerocket"),
    (("--cluster", "../x"), "error: --cluster: '../x' is not an EKS cluster name"),
])
def test_bad_options_are_one_line_before_any_call(home: Path, cluster: EksCluster, args: tuple[str, ...],
                                                  message: str) -> None:
    base = {"--cluster": cluster.name, "--region": "us-east-1"}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    flat = [x for kv in base.items() for x in kv]
    result = run(home, "provision", *flat, "--gpu", "A100:8", "--nodes", "2", "--karpenter")
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert isinstance(result.exception, InputError)
    assert f"error: {result.exception}".startswith(message), result.exception


def test_nothing_to_resume(home: Path) -> None:
    result = run(home, "provision", "--cluster", "ml", "--karpenter", "--resume", "g-1")
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert str(result.exception) == "--resume: --karpenter creates nothing, so there is nothing to resume"


def test_karpenter_needs_a_cluster(home: Path) -> None:
    result = run(home, "provision", "--gpu", "A100:8", "--nodes", "2", "--karpenter")
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert str(result.exception).startswith("--karpenter: needs --cluster NAME")


def test_karpenter_and_a_provisioning_request_are_not_asked_for_together(home: Path, tmp_path: Path) -> None:
    job = tmp_path / "train.yaml"
    job.write_text("apiVersion: geosched.io/v1alpha1\nkind: Job\nname: train\nimage: ghcr.io/example/train:1\n"
                   "workers: 2\ngpus_per_worker: 8\ngpu: A100\n", encoding="utf-8")
    result = run(home, "up", str(job), "--cluster", "ml", "--karpenter", "--provisioning-class",
                 "queued-provisioning.gke.io")
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert str(result.exception).startswith("--karpenter: and --provisioning-class both hand the nodes")
    assert not (home / "journal").exists()


def test_a_bad_option_is_one_line_on_stderr_in_the_real_process(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "geosched", "--home", str(tmp_path / "home"), "provision",
                           "--cluster", "ml", "--gpu", "A100:8", "--nodes", "2", "--karpenter", "--expire-after",
                           "30 days"], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "error: --expire-after: expected a duration such as 720h or 90m (digits with s, m or h) or Never, "
        "got '30 days'"]


def test_out_names_a_path_with_control_characters_escaped(home: Path, cluster: EksCluster, tmp_path: Path) -> None:
    # A file name may hold any byte but / and NUL: an OSC sequence in it retitled the terminal on "wrote PATH".
    job = tmp_path / "train.yaml"
    job.write_text("apiVersion: geosched.io/v1alpha1\nkind: Job\nname: train\nimage: ghcr.io/example/train:1\n"
                   "workers: 2\ngpus_per_worker: 8\ngpu: A100\n", encoding="utf-8")
    out = tmp_path / "pool\x1b]0;owned\x07.yaml"
    result = run(home, "up", str(job), "--cluster", cluster.name, "--region", "us-east-1", "--karpenter", "--out",
                 str(out), "--node-role", "arn:aws:iam::123456789012:role/eks/KarpenterNodeRole-ml")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"wrote {tmp_path}/pool\\x1b]0;owned\\x07.yaml\n"
    assert out.exists()


def rendered_tree(tmp_path: Path) -> tuple[Path, Callable[[], tuple[tuple[str, ...], tuple[str, ...]]]]:
    """A `gitops render` tree made in tmp_path/repo from the gitops tests' inputs, and the render to run again: it
    returns what that render wrote and removed, so a test can show a file beside the tree is left alone."""
    from geosched.files.fields import parse_time
    from geosched.gitops import render_tree
    from tests.gitops.gitops_support import AT, write_inputs

    repo = tmp_path / "repo"
    write_inputs(repo)
    at = parse_time(AT, "test", "")

    def render() -> tuple[tuple[str, ...], tuple[str, ...]]:
        changes = render_tree(repo / "jobs", repo / "snapshot", repo / "clusters.yaml", repo, at=at).changes
        return changes.written, changes.removed

    render()
    return repo, render


def test_out_in_a_gitops_tree_replaces_only_what_karpenter_wrote(home: Path, cluster: EksCluster,
                                                                 tmp_path: Path) -> None:
    """The Karpenter file beside a `gitops render` tree's jobs: a render and its check leave it alone (it carries no
    digest), and --out replaces only a file --karpenter wrote (its first line): never a render's job, a hand-written
    file, or what a link points at; each refusal one line, exit 2, the file as it was."""
    from geosched.gitops import check_tree
    from geosched.providers.karpenter_cli import HEADER

    repo, render = rendered_tree(tmp_path)
    job = tmp_path / "train.yaml"
    job.write_text("name: train\nimage: ghcr.io/example/train:1\nworkers: 2\ngpus_per_worker: 8\ngpu: A100\n",
                   encoding="utf-8")

    def up(out: Path) -> Any:
        return run(home, "up", str(job), "--cluster", cluster.name, "--region", "us-east-1", "--karpenter", "--out",
                   str(out), "--name", "kp-tree")

    out = repo / "clusters" / "west" / "default" / "train-karpenter.yaml"
    assert up(out).exit_code == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith(HEADER)
    assert render() == ((), ())  # the render writes nothing and removes nothing
    assert check_tree(repo / "jobs", repo / "snapshot", repo / "clusters.yaml", repo).up_to_date
    assert out.read_text(encoding="utf-8") == text
    assert up(out).exit_code == 0  # its own file: replaced

    render_job = repo / "clusters" / "west" / "default" / "beta.yaml"
    hand = repo / "clusters" / "west" / "default" / "mine.yaml"
    hand.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mine}\n", encoding="utf-8")
    link = repo / "clusters" / "west" / "default" / "link.yaml"
    link.symlink_to(hand)
    for path, reason in ((render_job, "holds something `geosched --karpenter` did not write"),
                         (hand, "holds something `geosched --karpenter` did not write"),
                         (link, "is a link or not a regular file"),
                         (repo / "clusters", "is a link or not a regular file")):
        before = path.read_bytes() if path.is_file() else None
        result = up(path)
        assert result.exit_code == EXIT_BAD_INPUT, result.output
        assert str(result.exception).startswith(f"--out: {path} {reason}"), result.exception
        assert (path.read_bytes() if path.is_file() else None) == before
    assert check_tree(repo / "jobs", repo / "snapshot", repo / "clusters.yaml", repo).up_to_date


def test_a_job_exported_with_the_renders_digest_does_not_make_the_file_the_renders(
        home: Path, cluster: EksCluster, tmp_path: Path) -> None:
    """A Job exported from a cluster a `gitops render` tree deployed (`kubectl get job train -o yaml`, trimmed)
    carries the render's digest annotation; taken as `up`'s input, the pinned copy in the Karpenter file kept it,
    and the render took the file for one of its own: the next render removed it (its NodePools pruned from Git,
    Karpenter removing the nodes under the running job) (attack5)."""
    from geosched.kube.provenance import DIGEST

    repo, render = rendered_tree(tmp_path)
    exported = tmp_path / "train.yaml"
    exported.write_text(f"""apiVersion: batch/v1
kind: Job
metadata:
  name: train
  namespace: default
  annotations:
    {DIGEST}: {"0975e113" * 8}
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
          limits: {{nvidia.com/gpu: 8}}
""", encoding="utf-8")
    out = repo / "clusters" / "west" / "default" / "train-karpenter.yaml"
    result = run(home, "up", str(exported), "--cluster", cluster.name, "--region", "us-east-1", "--karpenter",
                 "--out", str(out), "--name", "kp-train")
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert render() == ((), ())
    assert out.read_text(encoding="utf-8") == text


def test_report_says_the_capacity_it_rendered_is_not_charged(home: Path, cluster: EksCluster, tmp_path: Path) -> None:
    """geosched never applies a --karpenter render, so Karpenter's nodes have no ledger row: the report names the
    gang in a note instead of showing a total that silently leaves them out (report/METHODOLOGY.md)."""
    def notes() -> list[str]:
        result = run(home, "report", "cost", "--by", "job", "-o", "json")
        assert result.exit_code == 0, result.output
        return [n for n in json.loads(result.stdout)["notes"] if "Karpenter" in n]

    args = ("provision", "--cluster", cluster.name, "--region", "us-east-1", "--gpu", "A100:8", "--nodes", "2",
            "--karpenter", "--name", "kp-bill")
    assert run(home, *args, "--dry-run").exit_code == 0
    assert notes() == []  # a dry run renders nothing
    out = tmp_path / "karpenter.yaml"
    assert run(home, *args, "--out", str(out)).exit_code == 0
    assert notes() == [f"1 gang(s) of Karpenter capacity geosched rendered for GitOps (provision|up --karpenter: "
                       f"kp-bill in cluster {cluster.name}) are not charged: geosched does not apply the NodePools, "
                       "so Karpenter launches and removes their nodes (labelled karpenter.sh/nodepool=<pool>) "
                       "without a ledger row, and their cost, idle time included, is in the cloud's bill, not in "
                       "this report (METHODOLOGY.md)"]
    assert run(home, *args, "--out", str(out)).exit_code == 0  # rendered again: still one gang
    assert notes()[0].startswith("1 gang(s)")
    # The table a person reads: no row (nothing geosched charged), and still the count of notes and where they are
    # (review finding of stop 36: an empty table dropped its caption and read as a complete $0).
    table = run(home, "report", "cost", "--by", "job")
    assert table.exit_code == 0, table.output
    assert "nothing to show" in table.stdout and "1 note(s): --output md or json lists them" in table.stdout
