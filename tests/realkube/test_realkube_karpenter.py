"""Karpenter NodePool + EC2NodeClass (geosched/providers/nodegroups/karpenter.py) on the real control plane: the
upstream CRDs installed unchanged (aws/karpenter-provider-aws v1.15.2), so the real kube-apiserver checks what
geosched renders against their schema and CEL rules (server-side apply, dry run); then the pool applied, its nodes
launched by a Karpenter stand-in (tests/realkube/karpenter.py) and the gang, pinned to the pool
(karpenter_pin.py), bound by the real kube-scheduler to exactly those nodes, while the cluster's own free p5 nodes
in the same zone stay empty: from `geosched up JOB --cluster NAME --karpenter --out FILE` (the cluster read from
moto's EKS with real boto3) through `kubectl apply --server-side -f FILE`, as a GitOps controller applies it.

The plane's EKS cluster has its p5 (H100) nodes in us-east-1a, zone ID use1-az6 (plane.py).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from geosched.core.models import Pricing
from geosched.kube.client import APPLY_PATCH, Kube
from geosched.kube.jobinput import parse_job_text
from geosched.providers.nodegroups import karpenter
from geosched.providers.nodegroups.karpenter_pin import pinned
from geosched.providers.nodegroups.spec import Subnet, Target
from geosched.providers.plan import Candidate
from geosched_emulators import MotoServer
from tests.providers.eks_support import one_subnet_cluster, subnet_cluster
from tests.providers.prov_support import aws_env
from tests.realkube import karpenter as standin
from tests.realkube.cluster import apply
from tests.realkube.plane import EKS, Plane
from tests.realkube.realkube_support import (
    Bound,
    compact_job,
    geosched,
    job_pods_selector,
    kubectl,
    wait_all_running,
    wait_until,
)

pytestmark = pytest.mark.realkube
ZONE_ID, ZONE = "use1-az6", "us-east-1a"


def pool(gang: str, nodes: int, pricing: Pricing = Pricing.ON_DEMAND) -> karpenter.KarpenterPool:
    c = Candidate(provider="aws", region="us-east-1", zone=ZONE_ID, instance_type="p5.48xlarge", gpu="H100", gpus=8,
                  vcpus=192, pricing=pricing, node_usd_per_hour=98.32, usd_per_hour=98.32 * nodes,
                  gco2e_per_hour=None)
    target = Target(c, EKS, Subnet("subnet-0a1b2c3d4e5f60718", ZONE_ID, ZONE))
    return karpenter.pool(target, gang=gang, owner="o-realkube", seq=1, nodes=nodes, gpus_per_node=8,
                          role="KarpenterNodeRole-eks-us-east-1")


def dry_run(kube: Kube, obj: dict[str, Any]) -> dict[str, Any]:
    """Server-side apply with dryRun=All: every admission step and validation runs, nothing is stored."""
    resource = kube.resource(obj["apiVersion"], obj["kind"])
    assert resource is not None
    path = resource.path(None, obj["metadata"]["name"])
    return dict(kube.request("PATCH", path, query={"fieldManager": "geosched", "force": "true", "dryRun": "All"},
                             body=obj, content_type=APPLY_PATCH))


def contained(wrote: Any, stored: Any) -> bool:
    """Every field written is stored with its value (the server may add defaults beside them)."""
    if isinstance(wrote, dict):
        return isinstance(stored, dict) and all(k in stored and contained(v, stored[k]) for k, v in wrote.items())
    return bool(wrote == stored)


def refused(kube: Kube, obj: dict[str, Any]) -> str:
    with pytest.raises(ApiException) as caught:
        dry_run(kube, obj)
    assert caught.value.status == 422, caught.value.body
    return str(caught.value.body)


@pytest.fixture(scope="module")
def crds(realkube: Plane) -> Iterator[None]:
    with realkube.kube(EKS) as kube:
        standin.install_crds(kube)
    try:
        yield
    finally:
        with realkube.kube(EKS) as kube:
            standin.remove_crds(kube)


@pytest.mark.parametrize("pricing", [Pricing.ON_DEMAND, Pricing.SPOT])
@pytest.mark.parametrize("ami", list(karpenter.Ami))
def test_the_real_api_server_accepts_both_objects(realkube: Plane, crds: None, pricing: Pricing,
                                                  ami: karpenter.Ami) -> None:
    p = karpenter.KarpenterPool(**{**{f: getattr(pool("kp-accept", 8, pricing), f)
                                      for f in karpenter.KarpenterPool.__dataclass_fields__}, "ami": ami})
    with realkube.kube(EKS) as kube:
        for obj in karpenter.manifests([p]):
            stored = dry_run(kube, obj)
            # What the server would store is what geosched wrote (its defaults only added around it).
            assert contained(obj["spec"], stored["spec"]), (obj["spec"], stored["spec"])


def test_the_cel_rules_are_enforced(realkube: Plane, crds: None) -> None:
    """The checks only CEL states, which a JSON-schema validator cannot run: the same objects with one rule
    broken are refused by the server with the CRD's own message."""
    np, cls = karpenter.nodepool(pool("kp-cel", 8)), karpenter.ec2nodeclass(pool("kp-cel", 8))
    broken: list[tuple[dict[str, Any], str]] = []
    bad = copy.deepcopy(np)
    bad["spec"]["template"]["spec"]["requirements"].append(
        {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["x"]})
    broken.append((bad, 'label \\"karpenter.sh/nodepool\\" is restricted'))
    bad = copy.deepcopy(np)
    bad["spec"]["template"]["metadata"]["labels"]["kubernetes.io/hostname"] = "ip-10-0-0-1"
    broken.append((bad, 'label \\"kubernetes.io/hostname\\" is restricted'))
    bad = copy.deepcopy(cls)
    bad["spec"]["instanceProfile"] = "KarpenterNodeInstanceProfile"
    broken.append((bad, "must specify exactly one of ['role', 'instanceProfile']"))
    bad = copy.deepcopy(cls)
    bad["spec"]["amiSelectorTerms"].append({"id": "ami-0123456789abcdef0"})
    broken.append((bad, "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"))
    bad = copy.deepcopy(cls)
    bad["spec"]["tags"]["karpenter.sh/nodepool"] = "x"
    broken.append((bad, "tag contains a restricted tag matching karpenter.sh/nodepool"))
    with realkube.kube(EKS) as kube:
        for obj in (np, cls):
            dry_run(kube, obj)  # the unbroken objects pass: each refusal below is its one broken rule
        for obj, message in broken:
            body = refused(kube, obj)
            assert message in body, (message, body)


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    """The EKS cluster as AWS knows it (moto, real boto3): named like the plane's, one subnet, in use1-az6, which
    moto names us-east-1a as the plane's EKS account does (test_realkube_up.py)."""
    with MotoServer() as server:
        # moto's backends are per process: another suite's cluster of the same name would still be there.
        server.reset()
        one_subnet_cluster(server.url, EKS, ZONE_ID, ZONE, "10.0.32.0/24")
        yield server


def _up_karpenter(tmp_path: Path, ns: str, gang: str, moto_url: str) -> tuple[Path, list[dict[str, Any]]]:
    """`geosched up train.yaml --karpenter --out gitops/train.yaml` (4 x 8 GPUs in `ns`) on moto's EKS: the file
    and the objects it holds, in order."""
    out = tmp_path / "gitops" / "train.yaml"
    out.parent.mkdir()
    job = compact_job(tmp_path / "train.yaml", "train", workers=4, gpus=8, extra=f"namespace: {ns}\n")
    proc = geosched("up", str(job), "--cluster", EKS, "--region", "us-east-1", "--karpenter", "--out", str(out),
                    "--name", gang, env=aws_env(moto_url), home=tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    return out, [d for d in yaml.safe_load_all(out.read_text(encoding="utf-8")) if d]


def test_up_karpenter_then_gitops_apply_puts_the_gang_on_exactly_the_pools_nodes(
        realkube: Plane, crds: None, moto: MotoServer, tmp_path: Path) -> None:
    """The user's flow: `geosched up JOB --karpenter --out FILE`, the file applied as GitOps applies it (kubectl
    apply --server-side), Karpenter (the stand-in) launching the pool's nodes, the real kube-scheduler binding."""
    with realkube.namespace("karpenter-gang", clusters=(EKS,)) as ns, realkube.kube(EKS) as kube:
        out, objects = _up_karpenter(tmp_path, ns, "kp-gang", moto.url)
        assert [o["kind"] for o in objects] == ["EC2NodeClass", "NodePool", "Service", "Job"]
        made: list[str] = []
        try:
            applied = kubectl(realkube, EKS, "apply", "--server-side", "--field-manager", "gitops", "-f", str(out))
            assert applied.returncode == 0, applied.stderr
            stored = kube.get("/apis/karpenter.sh/v1/nodepools/kp-gang-1")
            assert stored is not None
            nodes = standin.launch(stored, region="us-east-1", zone_id=ZONE_ID)
            assert len(nodes) == 4
            for node in nodes:
                kube.request("POST", "/api/v1/nodes", body=node)
                made.append(node["metadata"]["name"])
            bound = wait_all_running(kube, ns, 4, job_pods_selector("train"), timeout=180)
            # Every pod on a node of the pool (the plane's own two free p5 nodes in us-east-1a took none).
            assert sorted(b.node or "" for b in bound) == sorted(made)
            assert {(b.zone, b.fleet_zone, b.accelerator) for b in bound} == {
                (ZONE, ZONE_ID, "NVIDIA-H100-80GB-HBM3")}
            _delete_job(kube, ns, "train")
        finally:
            for name in made:
                kube.request("DELETE", f"/api/v1/nodes/{name}")
            _delete_objects(kube, reversed(objects[:2]))


# --- failover past the first zone --------------------------------------------------------------------------------

ZONE_ID_B, ZONE_B = "use1-az1", "us-east-1b"  # moto's name for use1-az1 (tests/providers/eks_support.py ZONES)
SUBNETS = {ZONE: (ZONE_ID, "10.0.32"), ZONE_B: (ZONE_ID_B, "10.0.33")}


@pytest.fixture
def moto_two_zones() -> Iterator[MotoServer]:
    """The plane's EKS cluster as AWS knows it, over a subnet in each of two zones the catalog offers p5 in."""
    with MotoServer() as server:
        server.reset()
        subnet_cluster(server.url, EKS, [(ZONE_ID, ZONE, "10.0.32.0/24"), (ZONE_ID_B, ZONE_B, "10.0.33.0/24")])
        yield server


def test_a_zone_that_refuses_for_capacity_moves_the_whole_gang_to_the_next_pool(
        realkube: Plane, crds: None, moto_two_zones: MotoServer, tmp_path: Path) -> None:
    """`up --karpenter` renders a pool per zone, weighted in plan order; the first-weighted zone refuses every
    launch for capacity as Karpenter reports it (an InsufficientCapacityError event per NodeClaim, the NodeClaims
    deleted); Karpenter's next pass launches the next pool, and the real kube-scheduler binds all 4 pods there,
    none on the plane's free p5 nodes in us-east-1a."""
    with realkube.namespace("karpenter-failover", clusters=(EKS,)) as ns, realkube.kube(EKS) as kube:
        out, objects = _up_karpenter(tmp_path, ns, "kp-fail", moto_two_zones.url)
        assert [o["kind"] for o in objects] == ["EC2NodeClass", "NodePool"] * 2 + ["Service", "Job"]
        written = [o for o in objects if o["kind"] == "NodePool"]
        assert [p["spec"]["weight"] for p in written] == [100, 99]
        zones = [standin.requirement(p, "topology.kubernetes.io/zone") for p in written]
        assert sorted(zones) == sorted(SUBNETS)  # one pool in each of the cluster's zones
        first, second = (p["metadata"]["name"] for p in written)
        result = standin.Provisioned()
        try:
            applied = kubectl(realkube, EKS, "apply", "--server-side", "--field-manager", "gitops", "-f", str(out))
            assert applied.returncode == 0, applied.stderr
            # Karpenter acts on pending pods: the gang's 4, unbound (no node of either pool exists yet).
            wait_until(lambda: len([p for p in kube.list_all(f"/api/v1/namespaces/{ns}/pods",
                                                             label_selector=job_pods_selector("train"))[0]
                                    if p["status"].get("phase") == "Pending" and not p["spec"].get("nodeName")]) == 4,
                       120, what="the gang's 4 pods pending")
            stored = [kube.get(f"/apis/karpenter.sh/v1/nodepools/{p['metadata']['name']}") for p in written]
            assert all(stored)
            result = standin.provision(kube, [dict(p) for p in stored if p], refuse={zones[0]}, region="us-east-1",
                                       subnets=SUBNETS)
            assert result.pool == second and len(result.refused) == 4 and len(result.nodes) == 4
            # Karpenter's trace of the refusal: one InsufficientCapacityError event per refused NodeClaim, and no
            # NodeClaim of the refused pool left; the launched ones Launched=True.
            events = kube.list_all("/api/v1/namespaces/default/events",
                                   field_selector="involvedObject.kind=NodeClaim,reason=InsufficientCapacityError")[0]
            assert sorted(e["involvedObject"]["name"] for e in events
                          if e["involvedObject"]["name"].startswith(f"{first}-")) == sorted(result.refused)
            assert not kube.list_all(standin.NODECLAIMS, label_selector=f"karpenter.sh/nodepool={first}")[0]
            launched = kube.list_all(standin.NODECLAIMS, label_selector=f"karpenter.sh/nodepool={second}")[0]
            assert sorted(c["status"]["nodeName"] for c in launched) == sorted(result.nodes)
            assert all(c["status"]["conditions"][0]["type"] == "Launched" for c in launched)
            bound = wait_all_running(kube, ns, 4, job_pods_selector("train"), timeout=180)
            # The whole gang on the second pool's nodes, in its one zone (the plane's free p5 nodes in us-east-1a
            # took none).
            assert sorted(b.node or "" for b in bound) == sorted(result.nodes)
            assert {(b.zone, b.fleet_zone) for b in bound} == {(zones[1], SUBNETS[zones[1]][0])}
            _delete_job(kube, ns, "train")
        finally:
            for name in result.nodes:
                kube.request("DELETE", f"/api/v1/nodes/{name}")
            for name in result.claims:
                kube.request("DELETE", f"{standin.NODECLAIMS}/{name}")
            _delete_objects(kube, reversed(objects[:4]))


def _zone_pools(gang: str) -> tuple[karpenter.KarpenterPool, ...]:
    targets = [Target(Candidate(provider="aws", region="us-east-1", zone=zone_id, instance_type="p5.48xlarge",
                                gpu="H100", gpus=8, vcpus=192, pricing=Pricing.ON_DEMAND, node_usd_per_hour=98.32,
                                usd_per_hour=98.32 * 4, gco2e_per_hour=None),
                      EKS, Subnet(f"subnet-0{i}a1b2c3d4e5f6071", zone_id, zone))
               for i, (zone, (zone_id, _)) in enumerate(SUBNETS.items())]
    return karpenter.pools(targets, 2, gang=gang, owner="o-realkube", nodes=4, gpus_per_node=8,
                           role="KarpenterNodeRole-eks-us-east-1")


def _remove(kube: Kube, nodes: list[str], pools: tuple[karpenter.KarpenterPool, ...]) -> None:
    """What a test made: its kwok nodes, then each pool's NodePool and EC2NodeClass that still exist."""
    for name in nodes:
        kube.request("DELETE", f"/api/v1/nodes/{name}")
    for p in pools:
        _delete_objects(kube, reversed(karpenter.manifests([p])))


def _delete_objects(kube: Kube, objects: Iterable[dict[str, Any]]) -> None:
    """Each cluster-scoped object (a NodePool, an EC2NodeClass) that still exists, in the order given."""
    for obj in objects:
        resource = kube.resource(obj["apiVersion"], obj["kind"])
        if resource is not None and kube.get(resource.path(None, obj["metadata"]["name"])) is not None:
            kube.request("DELETE", resource.path(None, obj["metadata"]["name"]))


def _delete_job(kube: Kube, ns: str, name: str) -> None:
    """The Job `name` deleted with its pods, waited until the last pod is gone (the next test's nodes are free)."""
    kube.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/{name}", query={"propagationPolicy": "Background"})
    wait_until(lambda: not kube.list_all(f"/api/v1/namespaces/{ns}/pods", label_selector=job_pods_selector(name))[0],
               120, what=f"{name}'s pods gone")


def _launch_pools(kube: Kube, pools: tuple[karpenter.KarpenterPool, ...]) -> list[list[dict[str, Any]]]:
    """The pools applied; per pool, the Node objects the stand-in would launch for it (not yet created)."""
    for obj in karpenter.manifests(pools):
        apply(kube, obj)
    launched = []
    for p in pools:
        stored = kube.get(f"/apis/karpenter.sh/v1/nodepools/{p.name}")
        assert stored is not None
        zone_id, cidr_base = SUBNETS[p.zone_name]
        launched.append(standin.launch(stored, region="us-east-1", zone_id=zone_id, cidr_base=cidr_base))
    return launched


def _run_gang(kube: Kube, ns: str, name: str, pools: tuple[karpenter.KarpenterPool, ...], *,
              hold: bool) -> list[Bound]:
    """The compact job `name` pinned to `pools` (its gang affinity removed unless `hold`) run to all 4 pods bound;
    where they were bound. The job is deleted after."""
    job = parse_job_text(f"name: {name}\nworkers: 4\ngpu: H100\ngpus_per_worker: 8\nimage: ghcr.io/example/train:1\n"
                         f"namespace: {ns}\n", f"{name}.yaml")
    objects = pinned(job, pools)
    if not hold:
        template = objects[-1]["spec"]["template"]
        del template["spec"]["affinity"]["podAffinity"]
        del template["metadata"]["labels"]["geosched.io/gang"]
        # The control must spread for sure, not by the scheduler's soft preference: a hard one-skew zone spread.
        template["spec"]["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
            # The Job controller labels its pods with this (batch/v1, Kubernetes 1.27+).
            "labelSelector": {"matchLabels": {"batch.kubernetes.io/job-name": name}}}]
    for obj in objects:
        apply(kube, obj)
    bound = wait_all_running(kube, ns, 4, job_pods_selector(name), timeout=180)
    _delete_job(kube, ns, name)
    return bound


def test_the_gang_affinity_holds_the_gang_to_one_zone_when_both_pools_have_nodes(realkube: Plane, crds: None) -> None:
    """The guarantee is kube-scheduler's (InterPodAffinity, self-affinity of the first pod): with 4 free nodes in
    each of the two pools' zones, the pinned gang binds whole in one zone; the same pods without the gang affinity
    spread over both when a hard zone spread asks them to (the pools' zones both free), so the check can fail."""
    pools = _zone_pools("kp-onezone")
    made: list[str] = []
    with realkube.namespace("karpenter-onezone", clusters=(EKS,)) as ns, realkube.kube(EKS) as kube:
        try:
            for node in [n for launched in _launch_pools(kube, pools) for n in launched]:
                kube.request("POST", "/api/v1/nodes", body=node)
                made.append(node["metadata"]["name"])
            assert len(made) == 8
            free = _run_gang(kube, ns, "free", pools, hold=False)
            held = _run_gang(kube, ns, "held", pools, hold=True)
            assert {b.node for b in free + held} <= set(made)  # only the pools' nodes
            assert len({b.zone for b in free}) == 2, free
            assert len({b.zone for b in held}) == 1, held
        finally:
            _remove(kube, made, pools)


def test_a_gang_half_launched_in_one_zone_is_never_finished_in_another(realkube: Plane, crds: None) -> None:
    """A partial refusal (2 of the first zone's 4 NodeClaims launched, the rest refused): the 2 pods bound there
    hold the other 2 to that zone. When nodes of the second pool appear, the real kube-scheduler refuses them for
    the pending pods ("didn't match pod affinity rules") and the gang stays whole in one zone, half pending: the
    limit README states (the gang waits for its zone; geosched does not withdraw it)."""
    pools = _zone_pools("kp-partial")
    made: list[str] = []
    with realkube.namespace("karpenter-partial", clusters=(EKS,)) as ns, realkube.kube(EKS) as kube:
        try:
            first, second = _launch_pools(kube, pools)
            for node in first[:2]:  # the first pool's other 2 NodeClaims refused
                kube.request("POST", "/api/v1/nodes", body=node)
                made.append(node["metadata"]["name"])
            job = parse_job_text("name: half\nworkers: 4\ngpu: H100\ngpus_per_worker: 8\n"
                                 f"image: ghcr.io/example/train:1\nnamespace: {ns}\n", "half.yaml")
            for obj in pinned(job, pools):
                apply(kube, obj)
            selector = job_pods_selector("half")

            def bound() -> list[dict[str, Any]]:
                return [p for p in kube.list_all(f"/api/v1/namespaces/{ns}/pods", label_selector=selector)[0]
                        if p["spec"].get("nodeName")]

            wait_until(lambda: len(bound()) == 2, 180, what="2 pods bound in the first zone")
            for node in second:
                kube.request("POST", "/api/v1/nodes", body=node)
                made.append(node["metadata"]["name"])
            # The scheduler retries the pending pods on the new nodes and says why it refuses them: only the second
            # pool's nodes fail on pod affinity (the first's are full, the plane's others fail on node affinity).
            wait_until(lambda: any("didn't match pod affinity rules" in (e.get("message") or "")
                                   for e in kube.list_all(f"/api/v1/namespaces/{ns}/events",
                                                          field_selector="reason=FailedScheduling")[0]),
                       180, what="a FailedScheduling event naming the pod affinity")
            on = {p["spec"]["nodeName"] for p in bound()}
            assert len(on) == 2 and on <= {n["metadata"]["name"] for n in first[:2]}
        finally:
            kube.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/half",
                         query={"propagationPolicy": "Background"})
            _remove(kube, made, pools)
