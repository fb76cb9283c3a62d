"""Karpenter NodePool + EC2NodeClass for a gang (geosched/providers/nodegroups/karpenter.py) and the job pinned to
the pool (karpenter_pin.py): checked against the upstream CRDs (aws/karpenter-provider-aws v1.15.2,
tests/kube/data/crds) and the Kubernetes OpenAPI. The CRDs' CEL rules are enforced by a real kube-apiserver in
tests/realkube/test_realkube_karpenter.py."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kube_support import DATA, validate_manifest

from geosched.core.errors import InputError
from geosched.core.models import Pricing
from geosched.kube.jobinput import parse_job_text, read_job_file
from geosched.providers.nodegroups import karpenter
from geosched.providers.nodegroups import karpenter_pin as pin_module
from geosched.providers.nodegroups.karpenter_pin import pinned, unlaunchable
from geosched.providers.nodegroups.spec import Subnet, Target
from geosched.providers.plan import Candidate


def target(pricing: Pricing = Pricing.ON_DEMAND, gpu: str = "H100") -> Target:
    c = Candidate(provider="aws", region="us-east-1", zone="use1-az4", instance_type="p5.48xlarge", gpu=gpu, gpus=8,
                  vcpus=192, pricing=pricing, node_usd_per_hour=98.32, usd_per_hour=786.56, gco2e_per_hour=None)
    return Target(c, "ml-east", Subnet("subnet-0a1b2c3d4e5f60718", "use1-az4", "us-east-1d"))


def pool(pricing: Pricing = Pricing.ON_DEMAND, **kw: Any) -> karpenter.KarpenterPool:
    return karpenter.pool(target(pricing), gang="g-7f3a", owner="o-1234abcd", seq=1, nodes=8, gpus_per_node=8,
                          role="KarpenterNodeRole-ml-east", **kw)


def requirements(np: dict[str, Any]) -> dict[str, list[str]]:
    return {r["key"]: r["values"] for r in np["spec"]["template"]["spec"]["requirements"] if r["operator"] == "In"}


@pytest.mark.parametrize("pricing", [Pricing.ON_DEMAND, Pricing.SPOT])
@pytest.mark.parametrize("ami", list(karpenter.Ami))
def test_both_objects_match_the_upstream_crds(pricing: Pricing, ami: karpenter.Ami) -> None:
    for obj in karpenter.manifests([pool(pricing, ami=ami)]):
        validate_manifest(obj)


def test_the_pool_holds_exactly_the_planned_zone_type_and_capacity() -> None:
    cls, np = karpenter.manifests([pool()])
    assert (cls["kind"], np["kind"]) == ("EC2NodeClass", "NodePool")
    # The zone *name* of the cluster's subnet in the planned zone ID: what Karpenter's nodes carry.
    assert requirements(np) == {"topology.kubernetes.io/zone": ["us-east-1d"],
                                "node.kubernetes.io/instance-type": ["p5.48xlarge"],
                                "karpenter.sh/capacity-type": ["on-demand"]}
    assert requirements(karpenter.nodepool(pool(Pricing.SPOT)))["karpenter.sh/capacity-type"] == ["spot"]
    spec = np["spec"]
    assert spec["limits"] == {"nvidia.com/gpu": "64"}  # 8 nodes x 8 GPUs, and no more
    assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert spec["template"]["spec"]["expireAfter"] == "720h"
    assert spec["template"]["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert spec["template"]["spec"]["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                        "name": cls["metadata"]["name"]}
    assert spec["template"]["metadata"]["labels"] == {"geosched.io/gang": "g-7f3a",
                                                      "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert cls["spec"]["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "ml-east"}}]
    assert cls["spec"]["securityGroupSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "ml-east"}}]
    assert cls["spec"]["role"] == "KarpenterNodeRole-ml-east"
    assert cls["spec"]["amiSelectorTerms"] == [{"alias": "al2023@latest"}]


def test_a_gpu_without_a_product_label_adds_none() -> None:
    p = karpenter.pool(target(gpu="MI300X"), gang="g", owner="o", seq=1, nodes=1, gpus_per_node=8, role="r")
    assert karpenter.nodepool(p)["spec"]["template"]["metadata"]["labels"] == {"geosched.io/gang": "g"}


def test_the_schema_check_can_fail() -> None:
    """The validator is not a pass-through: a field the CRD does not know, and a value its enum refuses."""
    np = karpenter.nodepool(pool())
    bad = copy.deepcopy(np)
    bad["spec"]["disruption"]["consolidationPolicy"] = "Never"
    with pytest.raises(AssertionError, match="consolidationPolicy"):
        validate_manifest(bad)
    bad = copy.deepcopy(np)
    bad["spec"]["template"]["spec"]["expireAfter"] = "30 days"
    with pytest.raises(AssertionError, match="expireAfter"):
        validate_manifest(bad)
    cls = karpenter.ec2nodeclass(pool())
    cls["spec"]["subnetSelector"] = {"karpenter.sh/discovery": "ml-east"}  # the v1beta1 spelling
    with pytest.raises(AssertionError, match="subnetSelector"):
        validate_manifest(cls)


@pytest.mark.parametrize(("text", "name"), [
    ("KarpenterNodeRole-ml-east", "KarpenterNodeRole-ml-east"),
    ("arn:aws:iam::111122223333:role/KarpenterNodeRole-ml-east", "KarpenterNodeRole-ml-east"),
    ("arn:aws:iam::111122223333:role/eks/nodes/gpu-node", "gpu-node"),
    ("arn:aws:iam::1111:role/x", None),
    ("role with spaces", None),
    ("", None),
    ("x" * 65, None),
])
def test_role_names(text: str, name: str | None) -> None:
    assert karpenter.role_name(text) == name


@pytest.mark.parametrize(("text", "ok"), [("720h", True), ("90m", True), ("1h30m", True), ("Never", True),
                                          ("30d", False), ("", False), ("720h\n", False), ("-1h", False)])
def test_expire_after(text: str, ok: bool) -> None:
    assert (karpenter.expire_problem(text) is None) is ok


# --- the job pinned to the pool --------------------------------------------------------------------------------

def _pod_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    if obj["kind"] == "JobSet":
        return [r["template"]["spec"]["template"] for r in obj["spec"]["replicatedJobs"]]
    return [obj["spec"]["template"]]


@pytest.mark.parametrize("name", ["batch-job.yaml", "jobset.yaml"])
def test_the_job_pods_require_the_pool_and_tolerate_its_taint(name: str) -> None:
    job = read_job_file(DATA / name)
    before = copy.deepcopy(job.original)
    out = pinned(job, [pool()])
    assert job.original == before  # pinned on a copy
    obj = out[-1]
    for template in _pod_templates(obj):
        spec = template["spec"]
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        for term in terms:
            expressions = term["matchExpressions"]
            assert {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["g-7f3a-1"]} in expressions
            assert {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1d"]} in expressions
        assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"} \
            in spec["tolerations"] or any(t.get("operator") == "Exists" and t.get("key") == "nvidia.com/gpu"
                                          and t.get("effect") == "NoSchedule" for t in spec["tolerations"])
        assert template["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
    for o in out:
        validate_manifest(o)
    # Pinning twice changes nothing (a render of a rendered tree is a fixed point).
    again = pinned(read_job_file(DATA / name).__class__(**{**_fields(job), "original": obj}), [pool()])
    assert again[-1] == obj


def _fields(job: Any) -> dict[str, Any]:
    return {f: getattr(job, f) for f in job.__dataclass_fields__}


def test_a_compact_job_is_built_then_pinned() -> None:
    job = parse_job_text("name: pretrain\nworkers: 8\ngpu: H100\ngpus_per_worker: 8\n"
                         "image: ghcr.io/example/llm:1.0\n", "pretrain.yaml")
    out = pinned(job, [pool()])
    obj = out[-1]
    assert obj["kind"] == "Job"
    template = obj["spec"]["template"]
    assert template["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
    assert template["spec"]["tolerations"][-1] == {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true",
                                                   "effect": "NoSchedule"}
    for o in out:
        validate_manifest(o)


def test_a_kind_without_pod_templates_is_refused() -> None:
    job = read_job_file(DATA / "trainjob.yaml")
    if all(p.path is not None for p in job.pod_sets):
        pytest.skip("TrainJob pod sets carry templates here")
    with pytest.raises(InputError, match="cannot be pinned"):
        pinned(job, [pool()])


def test_selectors_the_pool_cannot_satisfy_are_said() -> None:
    """batch-job.yaml selects nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB: on an H100 pool Karpenter would launch
    nothing for it; a label no node of the pool is known to carry, the same."""
    job = read_job_file(DATA / "batch-job.yaml")
    out = pinned(job, [pool()])
    [line] = unlaunchable(out, job, [pool()])
    assert line == ("Job/llm-pretrain spec.template: nvidia.com/gpu.product In ['NVIDIA-A100-SXM4-80GB'], but the "
                    "pool's nodes carry nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3; Karpenter will launch no node "
                    "of pool g-7f3a-1 for these pods")
    obj = copy.deepcopy(dict(job.original or {}))
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"team.example.com/pool": "nlp"}
    odd = job.__class__(**{**_fields(job), "original": obj})
    [line] = unlaunchable(pinned(odd, [pool()]), odd, [pool()])
    assert "team.example.com/pool is not a label the pool's nodes are known to carry" in line
    # What the pool's nodes do carry, well-known labels and Exists included, is fine.
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                                       "kubernetes.io/arch": "amd64"}
    obj["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In",
                                                     "values": ["p5"]}]}]}}}
    fine = job.__class__(**{**_fields(job), "original": obj})
    assert unlaunchable(pinned(fine, [pool()]), fine, [pool()]) == []


def test_a_compact_job_pinned_is_launchable() -> None:
    job = parse_job_text("name: pretrain\nworkers: 8\ngpu: H100\ngpus_per_worker: 8\nimage: ghcr.io/example/llm:1.0\n",
                         "pretrain.yaml")
    assert unlaunchable(pinned(job, [pool()]), job, [pool()]) == []


# --- several zones: one pool each, weighted in plan order, the gang held to one zone -----------------------------

def zone_target(zone_id: str, zone_name: str, instance_type: str = "p5.48xlarge") -> Target:
    c = Candidate(provider="aws", region="us-east-1", zone=zone_id, instance_type=instance_type, gpu="H100", gpus=8,
                  vcpus=192, pricing=Pricing.ON_DEMAND, node_usd_per_hour=98.32, usd_per_hour=786.56,
                  gco2e_per_hour=None)
    return Target(c, "ml-east", Subnet(f"subnet-{zone_id}", zone_id, zone_name))


# The plan's rows in its order (spec.targets): us-east-1d twice (two instance types), then us-east-1a, us-east-1b;
# zone IDs map to names per account: use1-az4 as target() above, the others as tests/providers/eks_support.py ZONES.
PLAN_ROWS = (zone_target("use1-az4", "us-east-1d"), zone_target("use1-az4", "us-east-1d", "p5e.48xlarge"),
             zone_target("use1-az6", "us-east-1a"), zone_target("use1-az1", "us-east-1b"))


def zone_pools(zones: int = 3) -> tuple[karpenter.KarpenterPool, ...]:
    return karpenter.pools(PLAN_ROWS, zones, gang="g-7f3a", owner="o-1234abcd", nodes=4, gpus_per_node=8,
                           role="KarpenterNodeRole-ml-east")


def test_one_pool_per_zone_in_plan_order_weighted_highest_first() -> None:
    objects = karpenter.manifests(zone_pools())
    for obj in objects:
        validate_manifest(obj)
    pools = [o for o in objects if o["kind"] == "NodePool"]
    # A zone's first row only: the second type in us-east-1d could finish a half-launched gang with other nodes.
    assert [(p["metadata"]["name"], requirements(p)["topology.kubernetes.io/zone"],
             requirements(p)["node.kubernetes.io/instance-type"], p["spec"]["weight"]) for p in pools] == [
        ("g-7f3a-1", ["us-east-1d"], ["p5.48xlarge"], 100),
        ("g-7f3a-2", ["us-east-1a"], ["p5.48xlarge"], 99),
        ("g-7f3a-3", ["us-east-1b"], ["p5.48xlarge"], 98)]
    # Each pool no larger than the gang: whichever zone launches, it launches one gang.
    assert {p["spec"]["limits"]["nvidia.com/gpu"] for p in pools} == {"32"}
    assert [o["kind"] for o in objects] == ["EC2NodeClass", "NodePool"] * 3
    assert [p.zone_name for p in zone_pools(2)] == ["us-east-1d", "us-east-1a"]
    assert [p.weight for p in zone_pools(1)] == [100]


def test_a_weight_the_crd_refuses_is_caught() -> None:
    np = karpenter.nodepool(zone_pools()[0])
    np["spec"]["weight"] = 0
    with pytest.raises(AssertionError, match="weight"):
        validate_manifest(np)


def test_the_gang_is_held_to_one_zone_of_any_of_its_pools() -> None:
    pools = zone_pools()
    job = parse_job_text("name: pretrain\nworkers: 4\ngpu: H100\ngpus_per_worker: 8\nimage: ghcr.io/example/llm:1.0\n",
                         "pretrain.yaml")
    out = pinned(job, pools)
    for o in out:
        validate_manifest(o)
    template = out[-1]["spec"]["template"]
    [term] = template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["g-7f3a-1", "g-7f3a-2", "g-7f3a-3"]} \
        in term["matchExpressions"]
    assert {"key": "topology.kubernetes.io/zone", "operator": "In",
            "values": ["us-east-1d", "us-east-1a", "us-east-1b"]} in term["matchExpressions"]
    # Self-affinity on the zone: the pods select their own label, so the first binds anywhere and the rest follow.
    assert template["metadata"]["labels"]["geosched.io/gang"] == "g-7f3a"
    assert template["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
        {"labelSelector": {"matchLabels": {"geosched.io/gang": "g-7f3a"}},
         "topologyKey": "topology.kubernetes.io/zone"}]


@pytest.mark.parametrize("name", ["batch-job.yaml", "jobset.yaml"])
def test_every_pod_set_carries_the_gang_affinity_once(name: str) -> None:
    job = read_job_file(DATA / name)
    obj = pinned(job, zone_pools())[-1]
    for template in _pod_templates(obj):
        required = template["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert required.count(pin_module.gang_affinity("g-7f3a")) == 1
    again = pinned(job.__class__(**{**_fields(job), "original": obj}), zone_pools())
    assert again[-1] == obj  # a fixed point with several pools too


def test_a_selector_only_a_later_pool_satisfies_is_launchable() -> None:
    """A job selecting us-east-1a: the first pool (us-east-1d) cannot launch for it, the second can, so nothing is
    said; selecting a zone none of the pools holds is said once, with the first pool's reason."""
    job = read_job_file(DATA / "batch-job.yaml")
    obj = copy.deepcopy(dict(job.original or {}))
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": "us-east-1a"}
    in_a = job.__class__(**{**_fields(job), "original": obj})
    assert unlaunchable(pinned(in_a, zone_pools()), in_a, zone_pools()) == []
    assert unlaunchable(pinned(in_a, zone_pools(1)), in_a, zone_pools(1)) != []
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": "us-east-1c"}
    in_c = job.__class__(**{**_fields(job), "original": obj})
    [line] = unlaunchable(pinned(in_c, zone_pools()), in_c, zone_pools())
    assert line.endswith("but the pool's nodes carry topology.kubernetes.io/zone=us-east-1d; Karpenter will launch "
                         "no node of pool g-7f3a-1 for these pods")
