"""The account's GPU quota read before a node group or pool is created (issue 26): a gang that exceeds it skips
the region with the reason, and nothing is created; a gang that fits, or a quota that cannot be read, goes on.

EKS: moto's EKS with real boto3 behind the fault proxy, which answers Service Quotas GetServiceQuota for the EC2
vCPU codes (moto answers only VPC quotas: NoSuchResourceException otherwise), in the API's shape
{"Quota": {"ServiceCode", "QuotaCode", "Value", ...}} (Service Quotas API reference, GetServiceQuota; the proxy's
ec2_extras.py). GKE: the GKE double for the pool and the Compute Engine double for regions.get's `quotas`
[{metric, limit, usage}] (Compute Engine API reference, regions.get; geosched_emulators/gce.py), both read by the
Google SDKs unchanged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from geosched.core.errors import EXIT_NO_FIT
from geosched.providers import journal
from geosched.providers.gang import plan_gang
from geosched.providers.nodegroups import journal as groups_journal
from geosched.providers.nodegroups.gke import Gke
from geosched.providers.nodegroups.launch import provision, quota_precheck, read_cluster
from geosched.report.ledger import ledger_intervals
from geosched.store.db import Store
from geosched_emulators import Ec2FaultProxy, GceDouble, MotoServer
from geosched_emulators.gke import GkeDouble
from tests.providers.eks_support import NODE_ROLE, EksCluster, make_cluster
from tests.providers.gke_support import CLUSTER, LOCATION, PROJECT
from tests.providers.gke_support import make_cluster as make_gke_cluster
from tests.providers.gke_support import request as gke_request
from tests.providers.groups_support import fast
from tests.providers.prov_support import gcp_provider
from tests.providers.test_up_cli import run

pytestmark = pytest.mark.integration

P_ON_DEMAND = "L-417A185B"  # Running On-Demand P instances, in vCPUs (geosched/providers/aws.py VCPU_QUOTA_CODES)
P5_VCPUS = 192  # p5.48xlarge (the shipped catalog; EC2 instance types: 192 vCPUs)


@pytest.fixture
def home(tmp_path: Path, proxy: Ec2FaultProxy) -> Path:
    return tmp_path / "home"


@pytest.fixture
def cluster(moto: MotoServer, proxy: Ec2FaultProxy) -> EksCluster:
    # The quota counts the account's running P instances in the region: the session's moto holds those other
    # suites left running (2,016 vCPUs of them in a full run), so start from an empty account, as the kill
    # campaigns and the realkube suites do.
    moto.reset()
    return make_cluster(moto.url, ("use1-az2", "use1-az6"))


def provision_cli(home: Path, cluster: EksCluster, name: str) -> tuple[int, str]:
    result = run(home, "provision", "--cluster", cluster.name, "--region", "us-east-1", "--gpu", "H100:8",
                 "--nodes", "2", "--node-role", NODE_ROLE, "--name", name, "--yes", "-o", "json")
    return result.exit_code, result.output


def test_an_eks_gang_over_the_vcpu_quota_skips_the_region_with_the_reason_and_creates_nothing(
        home: Path, cluster: EksCluster, proxy: Ec2FaultProxy) -> None:
    proxy.set_service_quota(P_ON_DEMAND, 300, region="us-east-1")  # one p5 fits, the gang of two does not
    code, output = provision_cli(home, cluster, "over")
    assert code == EXIT_NO_FIT, output
    [row] = json.loads(output)["items"]
    assert (row["state"], row["nodegroup"]) == ("failed", None)
    assert row["message"] == (f"no zone of cluster {cluster.name} held 2 x H100:8 (last: quota: the gang needs "
                              f"{2 * P5_VCPUS} vCPUs, 0 of the 300 of quota {P_ON_DEMAND} in us-east-1 are in "
                              "use)"), row["message"]
    assert cluster.groups() == {}
    with Store(home) as store:
        tried = [(a.zone, a.outcome, a.error_kind, a.error_code) for a in journal.attempts(store, "over")
                 if a.provider == "aws" and a.zone in ("use1-az2", "use1-az6")]
        # The first zone is refused by the quota, the region's other zone skipped without a call (the quota is
        # the region's); no group row, nothing charged.
        assert tried == [("use1-az2", "failed", "quota", "VcpuLimitExceeded"), ("use1-az6", "skipped", None, None)]
        assert groups_journal.groups(store, gang="over") == []
        assert ledger_intervals(store) == []
        # Remembered for the quota TTL: the next plan skips the region's on-demand offerings.
        assert {(b.region, b.kind) for b in journal.active_blocks(store)} == {("us-east-1", "quota")}


@pytest.mark.parametrize("limit", [2 * P5_VCPUS, None], ids=["fits", "unreadable"])
def test_a_gang_within_the_quota_or_with_no_readable_quota_is_created(
        home: Path, cluster: EksCluster, proxy: Ec2FaultProxy, limit: float | None) -> None:
    proxy.set_service_quota(P_ON_DEMAND, limit, region="us-east-1")
    code, output = provision_cli(home, cluster, "fits")
    assert code == 0, output
    assert len(cluster.groups()) == 1
    down = run(home, "down", "fits", "--yes")
    assert down.exit_code == 0, down.output
    assert cluster.groups() == {}


@pytest.fixture
def gke() -> Iterator[GkeDouble]:
    with GkeDouble(operation_delay_s=0.05) as double:
        make_gke_cluster(double)
        yield double


def test_a_gke_gang_over_the_regional_h100_quota_creates_no_pool(tmp_path: Path, gke: GkeDouble,
                                                                  gce: GceDouble) -> None:
    gce.set_quota("NVIDIA_H100_GPUS", 8, region=LOCATION)  # one a3-highgpu-8g; the gang of two needs 16
    gcp = gcp_provider(gce.endpoint)
    with Store(tmp_path / "home") as store:
        backend = Gke(LOCATION, project=PROJECT, endpoint=gke.endpoint)
        plan = plan_gang(gke_request(2), {"gcp": gcp}, store)
        found = read_cluster(backend, CLUSTER, fast())
        result = provision(plan, found, backend, store, gang="gq", settings=fast(),
                           precheck=quota_precheck({"gcp": gcp}, "gq"))
        assert not result.ok
        assert "quota: " in result.message and "NVIDIA_H100_GPUS" in result.message, result.message
        tried = [a for a in result.attempts if a.outcome != "skipped"]
        assert [(a.outcome, a.error_kind, a.error_code) for a in tried] == [("failed", "quota", "QUOTA_EXCEEDED")]
        assert gke.pools() == {} and groups_journal.groups(store, gang="gq") == []
        assert gce.call_count("regions.get") == 1
    # With room for the gang the same plan creates the pool (the quota read again in a new run).
    gce.set_quota("NVIDIA_H100_GPUS", 16, region=LOCATION)
    gcp = gcp_provider(gce.endpoint)
    with Store(tmp_path / "home2") as store:
        result = provision(plan_gang(gke_request(2), {"gcp": gcp}, store), found, backend, store, gang="gok",
                           settings=fast(), precheck=quota_precheck({"gcp": gcp}, "gok"))
        assert result.ok, result.message
        assert len(gke.pools()) == 1
