# google.api_core's ExtendedOperation.result()/done() are unannotated.
# mypy: disable-error-code="no-untyped-call"
"""The cloud API doubles speak real HTTP to the unmodified official SDKs.

GCE: google-cloud-compute (REST transport) against geosched_emulators.gce.
AWS: boto3 against moto's server behind geosched_emulators.faultproxy.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.exceptions import ClientError, ReadTimeoutError  # type: ignore[import-untyped]
from google.api_core import exceptions as gexc
from google.cloud import compute_v1
from google.protobuf import json_format  # type: ignore[import-untyped]

try:
    from geosched_emulators import Ec2Fault, Ec2FaultProxy, GceDouble, GceFault, MotoServer
    from geosched_emulators.gce import compile_filter
except ModuleNotFoundError:  # pytest started without the repo root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from geosched_emulators import Ec2Fault, Ec2FaultProxy, GceDouble, GceFault, MotoServer
    from geosched_emulators.gce import compile_filter

pytestmark = pytest.mark.integration

PROJECT = "geosched-test"
A100_8 = "a2-highgpu-8g"


# --------------------------------------------------------------------------
# GCE
# --------------------------------------------------------------------------


@pytest.fixture
def gce() -> Iterator[GceDouble]:
    with GceDouble() as double:
        yield double


@pytest.fixture
def instances(gce: GceDouble) -> compute_v1.InstancesClient:
    client = compute_v1.InstancesClient(**gce.client_kwargs())
    gce.route_extended_operations(client)
    return client


def _vm(name: str, zone: str, machine_type: str = A100_8, **labels: str) -> compute_v1.Instance:
    return compute_v1.Instance(
        name=name,
        machine_type=f"zones/{zone}/machineTypes/{machine_type}",
        labels=labels,
        scheduling=compute_v1.Scheduling(provisioning_model="SPOT", on_host_maintenance="TERMINATE"),
        network_interfaces=[compute_v1.NetworkInterface(network="global/networks/default")],
    )


def _raw(gce: GceDouble, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(gce.endpoint + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return int(resp.status), json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return int(err.code), json.loads(err.read())


def test_gce_instance_round_trip(gce: GceDouble, instances: compute_v1.InstancesClient) -> None:
    zone = "us-central1-a"
    op = instances.insert(project=PROJECT, zone=zone, instance_resource=_vm("gang-0", zone, team="ml", job="j1"))
    assert op.name.startswith("operation-")

    waited = compute_v1.ZoneOperationsClient(**gce.client_kwargs()).wait(project=PROJECT, zone=zone, operation=op.name)
    assert waited.status == compute_v1.Operation.Status.DONE
    assert not waited.error.errors
    assert op.result(timeout=10) is None

    vm = instances.get(project=PROJECT, zone=zone, instance="gang-0")
    assert vm.status == "RUNNING"
    assert vm.id > 0
    assert dict(vm.labels) == {"team": "ml", "job": "j1"}
    assert vm.machine_type.endswith(f"/zones/{zone}/machineTypes/{A100_8}")
    assert vm.self_link.endswith(f"/projects/{PROJECT}/zones/{zone}/instances/gang-0")
    assert [(a.accelerator_type.rsplit("/", 1)[-1], a.accelerator_count) for a in vm.guest_accelerators] == [
        ("nvidia-tesla-a100", 8)
    ]
    assert vm.scheduling.provisioning_model == "SPOT"

    instances.insert(
        project=PROJECT, zone="europe-west4-b", instance_resource=_vm("other", "europe-west4-b", team="web")
    ).result(timeout=10)

    listed = instances.list(request={"project": PROJECT, "zone": zone, "filter": "labels.team = ml"})
    assert [i.name for i in listed] == ["gang-0"]

    aggregated = {
        scope: [i.name for i in scoped.instances]
        for scope, scoped in instances.aggregated_list(request={"project": PROJECT})
        if scoped.instances
    }
    assert aggregated == {f"zones/{zone}": ["gang-0"], "zones/europe-west4-b": ["other"]}
    filtered = {
        scope: [i.name for i in scoped.instances]
        for scope, scoped in instances.aggregated_list(request={"project": PROJECT, "filter": "labels.team=web"})
        if scoped.instances
    }
    assert filtered == {"zones/europe-west4-b": ["other"]}

    instances.delete(project=PROJECT, zone=zone, instance="gang-0").result(timeout=10)
    with pytest.raises(gexc.NotFound):
        instances.get(project=PROJECT, zone=zone, instance="gang-0")
    assert gce.call_count("instances.insert") == 2
    assert gce.call_count("instances.delete", zone=zone) == 1


def test_gce_result_polls_the_double_when_operations_take_time(
    gce: GceDouble, instances: compute_v1.InstancesClient
) -> None:
    # Long enough that the get() below surely lands before completion.
    gce.operation_delay_s = 0.5
    zone = "us-east4-a"
    op = instances.insert(project=PROJECT, zone=zone, instance_resource=_vm("slow", zone, "a3-highgpu-8g"))
    assert op.status == compute_v1.Operation.Status.RUNNING
    assert instances.get(project=PROJECT, zone=zone, instance="slow").status == "PROVISIONING"
    op.result(timeout=10)
    assert instances.get(project=PROJECT, zone=zone, instance="slow").status == "RUNNING"
    assert gce.call_count("zoneOperations.get", zone=zone) >= 1


def test_gce_catalog_clients(gce: GceDouble) -> None:
    kw = gce.client_kwargs()
    zones = [z.name for z in compute_v1.ZonesClient(**kw).list(project=PROJECT)]
    assert "us-central1-a" in zones and "europe-west4-b" in zones and len(zones) == 7

    machine_types = compute_v1.MachineTypesClient(**kw)
    in_zone = {m.name: m for m in machine_types.list(project=PROJECT, zone="us-east4-a")}
    a3 = in_zone["a3-highgpu-8g"]
    assert (a3.guest_cpus, a3.accelerators[0].guest_accelerator_type, a3.accelerators[0].guest_accelerator_count) == (
        208,
        "nvidia-h100-80gb",
        8,
    )
    assert A100_8 not in in_zone
    g2 = machine_types.get(project=PROJECT, zone="us-central1-b", machine_type="g2-standard-96")
    assert g2.accelerators[0].guest_accelerator_type == "nvidia-l4"
    offered = {
        scope
        for scope, scoped in machine_types.aggregated_list(project=PROJECT)
        if any(m.name == A100_8 for m in scoped.machine_types)
    }
    assert "zones/us-central1-a" in offered and "zones/us-east4-a" not in offered

    accel = compute_v1.AcceleratorTypesClient(**kw)
    assert {a.name for a in accel.list(project=PROJECT, zone="us-central1-a")} == {
        "nvidia-tesla-a100",
        "nvidia-h100-80gb",
        "nvidia-l4",
    }
    by_zone = {scope: {a.name for a in s.accelerator_types} for scope, s in accel.aggregated_list(project=PROJECT)}
    assert by_zone["zones/us-east4-b"] == {"nvidia-h100-80gb"}

    gce.set_quota("NVIDIA_H100_GPUS", 16, region="us-central1")
    region = compute_v1.RegionsClient(**kw).get(project=PROJECT, region="us-central1")
    quotas = {q.metric: (q.limit, q.usage) for q in region.quotas}
    assert quotas["NVIDIA_H100_GPUS"] == (16.0, 0.0)
    assert len(region.zones) == 3


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/zones/us-central1-a/instances", compute_v1.InstanceList),
        ("/zones/us-central1-a/instances/strict", compute_v1.Instance),
        ("/aggregated/instances", compute_v1.InstanceAggregatedList),
        ("/zones", compute_v1.ZoneList),
        ("/zones/us-central1-a", compute_v1.Zone),
        ("/regions/us-central1", compute_v1.Region),
        ("/zones/us-central1-a/machineTypes", compute_v1.MachineTypeList),
        ("/aggregated/machineTypes", compute_v1.MachineTypeAggregatedList),
        ("/zones/us-central1-a/acceleratorTypes", compute_v1.AcceleratorTypeList),
        ("/aggregated/acceleratorTypes", compute_v1.AcceleratorTypeAggregatedList),
        ("/zones/us-central1-b/operations", compute_v1.OperationList),
    ],
)
def test_gce_wire_format_has_no_fields_the_sdk_would_drop(gce: GceDouble, path: str, message: Any) -> None:
    # The SDK parses with ignore_unknown_fields=True, so a misspelt field
    # would silently vanish; a strict parse catches that.
    base = f"/compute/v1/projects/{PROJECT}"
    body = json_format.MessageToDict(compute_v1.Instance.pb(_vm("strict", "us-central1-a", "g2-standard-96")))
    assert _raw(gce, "POST", f"{base}/zones/us-central1-a/instances", body)[0] == 200
    gce.inject(GceFault.zone_resource_pool_exhausted(), zone="us-central1-b")
    status, op = _raw(
        gce,
        "POST",
        f"{base}/zones/us-central1-b/instances",
        {**body, "machineType": f"zones/us-central1-b/machineTypes/{A100_8}"},
    )
    assert status == 200 and op["status"] == "DONE"
    json_format.ParseDict(op, compute_v1.Operation.pb()(), ignore_unknown_fields=False)

    status, payload = _raw(gce, "GET", base + path)
    assert status == 200
    json_format.ParseDict(payload, message.pb()(), ignore_unknown_fields=False)
    assert isinstance(payload.get("kind"), str) and payload["kind"].startswith("compute#")


def test_gce_zone_resource_pool_exhausted_surfaces_like_real_gce(
    gce: GceDouble, instances: compute_v1.InstancesClient
) -> None:
    zone = "us-central1-b"
    gce.operation_delay_s = 0.05
    gce.inject(GceFault.zone_resource_pool_exhausted(), zone=zone, method="instances.insert")

    # insert() itself succeeds: the failure lives in the operation.
    op = instances.insert(project=PROJECT, zone=zone, instance_resource=_vm("gang-0", zone))
    assert op.status == compute_v1.Operation.Status.RUNNING
    time.sleep(0.06)  # real sleep: the GCE double completes an operation after operation_delay_s of real time
    assert op.done()
    assert op.error_code == 503  # Operation.http_error_status_code
    assert op.error.errors[0].code == "ZONE_RESOURCE_POOL_EXHAUSTED"

    with pytest.raises(gexc.ServiceUnavailable) as caught:
        op.result(timeout=10)
    err = caught.value
    assert err.code == 503
    assert [e.code for e in err.errors] == ["ZONE_RESOURCE_POOL_EXHAUSTED"]
    assert f"zones/{zone}" in err.errors[0].message
    assert isinstance(err.response, compute_v1.Operation)
    details = err.errors[0].error_details
    assert details[2].error_info.reason == "resource_availability"
    assert details[2].error_info.metadatas["vmType"] == A100_8

    # What a caller that waits explicitly sees.
    waited = compute_v1.ZoneOperationsClient(**gce.client_kwargs()).wait(project=PROJECT, zone=zone, operation=op.name)
    assert waited.status == compute_v1.Operation.Status.DONE
    assert waited.http_error_status_code == 503
    assert waited.error.errors[0].code == "ZONE_RESOURCE_POOL_EXHAUSTED"

    with pytest.raises(gexc.NotFound):
        instances.get(project=PROJECT, zone=zone, instance="gang-0")
    assert gce.call_count("instances.insert", zone=zone, error_code="ZONE_RESOURCE_POOL_EXHAUSTED") == 1
    # times=1: the next insert in the zone succeeds.
    instances.insert(project=PROJECT, zone=zone, instance_resource=_vm("gang-0", zone)).result(timeout=10)


@pytest.mark.parametrize(
    ("fault", "exc_type", "code", "in_message"),
    [
        (
            GceFault.zone_resource_pool_exhausted(with_details=True),
            gexc.ServiceUnavailable,
            "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
            "resource type:compute",
        ),
        (GceFault.quota_exceeded("GPUS_ALL_REGIONS", 8), gexc.Forbidden, "QUOTA_EXCEEDED", "'GPUS_ALL_REGIONS'"),
        (GceFault.quota_exceeded("NVIDIA_A100_GPUS"), gexc.Forbidden, "QUOTA_EXCEEDED", "in region us-central1"),
        (GceFault.unsupported_operation(), gexc.BadRequest, "UNSUPPORTED_OPERATION", A100_8),
        (GceFault.resource_operation_rate_exceeded(), gexc.Forbidden, "RESOURCE_OPERATION_RATE_EXCEEDED", "gang-0"),
    ],
)
def test_gce_operation_errors(
    gce: GceDouble,
    instances: compute_v1.InstancesClient,
    fault: GceFault,
    exc_type: type[gexc.GoogleAPICallError],
    code: str,
    in_message: str,
) -> None:
    gce.inject(fault, zone="us-central1-c")
    op = instances.insert(project=PROJECT, zone="us-central1-c", instance_resource=_vm("gang-0", "us-central1-c"))
    with pytest.raises(exc_type) as caught:
        op.result(timeout=10)
    assert caught.value.errors[0].code == code
    assert in_message in caught.value.errors[0].message


def test_gce_quota_and_capacity_limits_fail_inserts_naturally(
    gce: GceDouble, instances: compute_v1.InstancesClient
) -> None:
    gce.set_quota("PREEMPTIBLE_NVIDIA_A100_GPUS", 8, region="us-central1")
    instances.insert(project=PROJECT, zone="us-central1-a", instance_resource=_vm("a", "us-central1-a")).result(
        timeout=10
    )
    with pytest.raises(gexc.Forbidden) as caught:
        instances.insert(project=PROJECT, zone="us-central1-b", instance_resource=_vm("b", "us-central1-b")).result(
            timeout=10
        )
    assert caught.value.errors[0].code == "QUOTA_EXCEEDED"
    assert "PREEMPTIBLE_NVIDIA_A100_GPUS" in caught.value.errors[0].message
    # A stopped VM releases its GPUs.
    gce.set_instance_status(PROJECT, "us-central1-a", "a", "TERMINATED")
    instances.insert(project=PROJECT, zone="us-central1-b", instance_resource=_vm("b", "us-central1-b")).result(
        timeout=10
    )

    gce.set_capacity("europe-west4-a", "g2-standard-96", 1, with_details=True)

    def make(name: str) -> Any:
        return instances.insert(
            project=PROJECT, zone="europe-west4-a", instance_resource=_vm(name, "europe-west4-a", "g2-standard-96")
        )

    make("g-0").result(timeout=10)
    with pytest.raises(gexc.ServiceUnavailable) as exhausted:
        make("g-1").result(timeout=10)
    assert exhausted.value.errors[0].code == "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"


def test_gce_synchronous_http_errors(gce: GceDouble, instances: compute_v1.InstancesClient) -> None:
    zone = "us-east4-b"
    gce.inject(GceFault.rate_limited(), zone=zone, method="instances.insert")
    with pytest.raises(gexc.TooManyRequests) as throttled:
        instances.insert(project=PROJECT, zone=zone, instance_resource=_vm("x", zone, "a3-highgpu-8g"))
    assert throttled.value.code == 429
    # Synchronous errors carry the JSON `errors` entries as plain dicts.
    assert throttled.value.errors[0]["reason"] == "rateLimitExceeded"

    gce.inject(GceFault.unavailable(), zone=zone, method="instances.insert")
    with pytest.raises(gexc.ServiceUnavailable):
        instances.insert(project=PROJECT, zone=zone, instance_resource=_vm("x", zone, "a3-highgpu-8g"))

    gce.inject(GceFault.permission_denied(), zone=zone, method="instances.insert")
    with pytest.raises(gexc.Forbidden) as denied:
        instances.insert(project=PROJECT, zone=zone, instance_resource=_vm("x", zone, "a3-highgpu-8g"))
    assert "compute.instances.create" in denied.value.message

    gce.inject(GceFault.internal_error(), method="zones.list")
    with pytest.raises(gexc.InternalServerError):
        list(compute_v1.ZonesClient(**gce.client_kwargs()).list(project=PROJECT))

    # insert/delete/wait have no default retry; get/list do, on 503 only.
    instances.insert(project=PROJECT, zone=zone, instance_resource=_vm("x", zone, "a3-highgpu-8g")).result(timeout=10)
    gce.inject(GceFault.unavailable(), zone=zone, method="instances.get", times=1)
    assert instances.get(project=PROJECT, zone=zone, instance="x").name == "x"
    assert gce.call_count("instances.get", zone=zone) == 2
    gce.inject(GceFault.unavailable(), zone=zone, method="instances.get", times="always")
    with pytest.raises(gexc.ServiceUnavailable):
        instances.get(project=PROJECT, zone=zone, instance="x", retry=None)
    gce.clear_faults()
    assert instances.get(project=PROJECT, zone=zone, instance="x").status == "RUNNING"


def test_gce_stall_trips_client_timeout(gce: GceDouble, instances: compute_v1.InstancesClient) -> None:
    import requests

    gce.inject(GceFault.stall(2.0), method="zones.get")
    zones = compute_v1.ZonesClient(**gce.client_kwargs())
    started = time.monotonic()
    with pytest.raises(requests.exceptions.ReadTimeout):
        zones.get(project=PROJECT, zone="us-central1-a", timeout=0.3, retry=None)
    assert time.monotonic() - started < 1.5
    gce.inject(GceFault.stall(0.3), method="zones.get")
    started = time.monotonic()
    assert zones.get(project=PROJECT, zone="us-central1-a").name == "us-central1-a"
    assert time.monotonic() - started >= 0.3


def test_gce_admin_endpoint(gce: GceDouble, instances: compute_v1.InstancesClient) -> None:
    fault = GceFault.zone_resource_pool_exhausted().to_dict()
    status, _ = _raw(gce, "POST", "/_emulator/faults", {"fault": fault, "zone": "us-central1-a", "times": "always"})
    assert status == 200
    for name in ("a", "b"):
        with pytest.raises(gexc.ServiceUnavailable):
            instances.insert(
                project=PROJECT, zone="us-central1-a", instance_resource=_vm(name, "us-central1-a")
            ).result(timeout=10)
    status, calls = _raw(gce, "GET", "/_emulator/calls")
    assert [c["error_code"] for c in calls["calls"] if c["method"] == "instances.insert"] == [
        "ZONE_RESOURCE_POOL_EXHAUSTED"
    ] * 2
    assert _raw(gce, "DELETE", "/_emulator/faults")[0] == 200
    instances.insert(project=PROJECT, zone="us-central1-a", instance_resource=_vm("c", "us-central1-a")).result(
        timeout=10
    )


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("labels.team = ml", True),
        ("labels.team=ml", True),
        ('labels.team = "ml"', True),
        ("labels.team != ml", False),
        ("labels.team = ml labels.job = j1", True),
        ("labels.team = ml AND labels.job = j2", False),
        ("(labels.team = web) OR (labels.job = j1)", True),
        ("NOT labels.team = web", True),
        ("labels.gang:*", False),
        ("labels.team:*", True),
        ("name eq 'gang-.*'", True),
        ("zone = us-central1-a", True),
        ("scheduling.preemptible = false", True),
    ],
)
def test_gce_list_filter(expr: str, expected: bool) -> None:
    resource = {
        "name": "gang-0",
        "labels": {"team": "ml", "job": "j1"},
        "zone": "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a",
        "scheduling": {"preemptible": False},
    }
    assert compile_filter(expr)(resource) is expected


def test_gce_bad_filter_is_a_400(gce: GceDouble, instances: compute_v1.InstancesClient) -> None:
    with pytest.raises(gexc.BadRequest):
        list(instances.list(request={"project": PROJECT, "zone": "us-central1-a", "filter": "labels.team ="}))


# --------------------------------------------------------------------------
# AWS
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    with MotoServer() as server:
        yield server


@pytest.fixture
def proxy(moto: MotoServer) -> Iterator[Ec2FaultProxy]:
    # No moto.reset() per test: re-initialising the region costs ~1.5 s on the
    # next call, so tests stay independent of each other's instances instead.
    with Ec2FaultProxy(moto.url) as p:
        yield p


def _ec2(url: str, **config: Any) -> Any:
    # total_max_attempts=1: botocore would otherwise retry the 5xx faults.
    retries = config.pop("retries", {"mode": "standard", "total_max_attempts": 1})
    return boto3.client(
        "ec2",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries=retries, **config),
    )


def _ami(ec2: Any) -> str:
    # Unfiltered, moto serialises ~1300 default AMIs (1-2 s a call).
    images = ec2.describe_images(Owners=["amazon"], Filters=[{"Name": "name", "Values": ["Deep Learning AMI*"]}])
    return str(images["Images"][0]["ImageId"])


def _run(ec2: Any, ami: str, zone: str | None = None, **extra: Any) -> Any:
    if zone is not None:
        extra["Placement"] = {"AvailabilityZone": zone}
    return ec2.run_instances(ImageId=ami, InstanceType="p4d.24xlarge", MinCount=1, MaxCount=1, **extra)


def test_aws_run_instances_through_proxy(proxy: Ec2FaultProxy) -> None:
    ec2 = _ec2(proxy.url)
    ami = _ami(ec2)
    job = f"job-{uuid.uuid4().hex[:8]}"
    tags = [{"ResourceType": "instance", "Tags": [{"Key": "geosched:job", "Value": job}]}]
    out = _run(ec2, ami, "us-east-1b", TagSpecifications=tags)
    inst = out["Instances"][0]
    assert inst["Placement"]["AvailabilityZone"] == "us-east-1b"
    assert inst["Tags"] == [{"Key": "geosched:job", "Value": job}]
    found = ec2.describe_instances(Filters=[{"Name": "tag:geosched:job", "Values": [job]}])
    assert [i["InstanceId"] for r in found["Reservations"] for i in r["Instances"]] == [inst["InstanceId"]]
    assert proxy.call_count("RunInstances", zone="us-east-1b", status=200) == 1


@pytest.mark.parametrize(
    ("fault", "status"),
    [
        (Ec2Fault.insufficient_instance_capacity(), 500),
        (Ec2Fault.instance_limit_exceeded(), 400),
        (Ec2Fault.vcpu_limit_exceeded(), 400),
        (Ec2Fault.max_spot_instance_count_exceeded(), 400),
        (Ec2Fault.unsupported(), 400),
        (Ec2Fault.request_limit_exceeded(), 503),
        (Ec2Fault.internal_error(), 500),
        (Ec2Fault.auth_failure(), 401),
        (Ec2Fault.unauthorized_operation(), 403),
    ],
)
def test_aws_injected_errors_raise_client_error(proxy: Ec2FaultProxy, fault: Ec2Fault, status: int) -> None:
    ec2 = _ec2(proxy.url)
    ami = _ami(ec2)
    proxy.inject(fault, zone="us-east-1a", action="RunInstances")
    with pytest.raises(ClientError) as caught:
        _run(ec2, ami, "us-east-1a")
    err = caught.value.response
    assert err["Error"]["Code"] == fault.code
    assert err["ResponseMetadata"]["HTTPStatusCode"] == status
    assert "{" not in err["Error"]["Message"]
    if fault.code in ("InsufficientInstanceCapacity", "Unsupported"):
        assert "(us-east-1a)" in err["Error"]["Message"] and "p4d.24xlarge" in err["Error"]["Message"]
    # Scoped to the zone: another AZ is untouched, and times=1 is spent.
    assert _run(ec2, ami, "us-east-1b")["Instances"]
    assert _run(ec2, ami, "us-east-1a")["Instances"]
    assert proxy.call_count("RunInstances", zone="us-east-1a", error_code=fault.code) == 1


def test_aws_zone_from_subnet_and_instance_ids(moto: MotoServer, proxy: Ec2FaultProxy) -> None:
    direct = _ec2(moto.url)  # ids the proxy has never seen
    ami = _ami(direct)
    subnet_c = next(
        s["SubnetId"] for s in direct.describe_subnets()["Subnets"] if s["AvailabilityZone"] == "us-east-1c"
    )
    victim = _run(direct, ami, "us-east-1d")["Instances"][0]["InstanceId"]

    ec2 = _ec2(proxy.url)
    proxy.inject(Ec2Fault.insufficient_instance_capacity(), zone="us-east-1c", times="always")
    proxy.inject(Ec2Fault.unauthorized_operation(), zone="us-east-1d", action="TerminateInstances")
    for _ in range(2):
        with pytest.raises(ClientError, match="InsufficientInstanceCapacity"):
            _run(ec2, ami, SubnetId=subnet_c)
    with pytest.raises(ClientError, match="UnauthorizedOperation"):
        ec2.terminate_instances(InstanceIds=[victim])
    assert proxy.call_count("RunInstances", zone="us-east-1c", status=500) == 2
    assert proxy.call_count("TerminateInstances", zone="us-east-1d") == 1


def test_aws_default_retries_swallow_next_k_faults(proxy: Ec2FaultProxy) -> None:
    # botocore's default (legacy) policy retries HTTP 500/503 up to 4 times,
    # so a single InsufficientInstanceCapacity or RequestLimitExceeded never
    # reaches the caller unless retries are turned down.
    ec2 = _ec2(proxy.url, retries={"mode": "legacy"})
    ami = _ami(ec2)
    proxy.inject(Ec2Fault.insufficient_instance_capacity(), zone="us-east-1a")
    assert _run(ec2, ami, "us-east-1a")["Instances"]
    assert [c.status for c in proxy.calls if c.method == "RunInstances"] == [500, 200]


def test_aws_stall(proxy: Ec2FaultProxy) -> None:
    ec2 = _ec2(proxy.url, read_timeout=1.0, connect_timeout=1)
    ec2.describe_availability_zones()  # moto initialises the region lazily
    proxy.inject(Ec2Fault.stall(3.0), action="DescribeAvailabilityZones")
    started = time.monotonic()
    with pytest.raises(ReadTimeoutError):
        ec2.describe_availability_zones()
    assert time.monotonic() - started < 2.5
    proxy.inject(Ec2Fault.stall(0.2), action="DescribeAvailabilityZones")
    started = time.monotonic()
    assert ec2.describe_availability_zones()["AvailabilityZones"]
    assert time.monotonic() - started >= 0.2


def test_aws_describe_apis_through_proxy(proxy: Ec2FaultProxy) -> None:
    ec2 = _ec2(proxy.url)
    types = ec2.describe_instance_types(InstanceTypes=["p4d.24xlarge", "p5.48xlarge"])["InstanceTypes"]
    gpus = {t["InstanceType"]: (t["GpuInfo"]["Gpus"][0]["Name"], t["GpuInfo"]["Gpus"][0]["Count"]) for t in types}
    assert gpus == {"p4d.24xlarge": ("A100", 8), "p5.48xlarge": ("H100", 8)}

    offerings = ec2.describe_instance_type_offerings(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": ["p4d.24xlarge"]}]
    )["InstanceTypeOfferings"]
    assert {o["Location"] for o in offerings} >= {"us-east-1a", "us-east-1b"}

    history = ec2.describe_spot_price_history(InstanceTypes=["p4d.24xlarge"], MaxResults=10)["SpotPriceHistory"]
    assert history and all(h["InstanceType"] == "p4d.24xlarge" for h in history)
    assert float(history[0]["SpotPrice"]) > 0

    assert _ami(ec2).startswith("ami-")
    assert proxy.call_count(status=200) == 4


def test_aws_admin_endpoint(proxy: Ec2FaultProxy) -> None:
    body = json.dumps({"fault": Ec2Fault.vcpu_limit_exceeded().to_dict(), "action": "RunInstances"}).encode()
    req = urllib.request.Request(proxy.url + "/_emulator/faults", data=body, method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200
    ec2 = _ec2(proxy.url)
    with pytest.raises(ClientError, match="VcpuLimitExceeded"):
        _run(ec2, _ami(ec2))
    with urllib.request.urlopen(proxy.url + "/_emulator/calls", timeout=10) as resp:
        calls = json.loads(resp.read())["calls"]
    assert calls[-1]["method"] == "RunInstances" and calls[-1]["error_code"] == "VcpuLimitExceeded"


def test_aws_spot_placement_scores_and_history_in_the_documented_shapes(proxy: Ec2FaultProxy) -> None:
    """GetSpotPlacementScores (moto has none) and a set spot price history, read by boto3's own parser: the
    EC2 API reference's shapes (API_GetSpotPlacementScores.html, API_DescribeSpotPriceHistory.html)."""
    ec2 = _ec2(proxy.url)
    assert ec2.get_spot_placement_scores(InstanceTypes=["p4d.24xlarge"], TargetCapacity=4,
                                         RegionNames=["us-east-1"])["SpotPlacementScores"] == []
    # A scenario set from another process through the admin endpoint, one score set in process.
    request = urllib.request.Request(
        f"{proxy.url}/_emulator/spot-placement-score", method="POST",
        data=json.dumps({"region": "us-east-1", "zoneId": "use1-az1", "score": 3,
                         "instanceType": "p4d.24xlarge"}).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200
    proxy.set_placement_score("us-east-1", "use1-az2", 8)  # any instance type
    zones = ec2.get_spot_placement_scores(InstanceTypes=["p4d.24xlarge"], TargetCapacity=4,
                                          SingleAvailabilityZone=True, RegionNames=["us-east-1"])
    assert zones["SpotPlacementScores"] == [
        {"Region": "us-east-1", "AvailabilityZoneId": "use1-az2", "Score": 8},
        {"Region": "us-east-1", "AvailabilityZoneId": "use1-az1", "Score": 3}]
    regions = ec2.get_spot_placement_scores(InstanceTypes=["p5.48xlarge"], TargetCapacity=4,
                                            RegionNames=["us-east-1", "us-east-2"])
    assert regions["SpotPlacementScores"] == [{"Region": "us-east-1", "Score": 8}]  # region level: no zone

    now = time.time()
    proxy.set_spot_price_history("us-east-1", [("us-east-1b", "p4d.24xlarge", now - 10 * 86400, 9.5),
                                               ("us-east-1b", "p4d.24xlarge", now - 3600, 9.9),
                                               ("us-east-1c", "p5.48xlarge", now - 3600, 30.0)])
    history = ec2.describe_spot_price_history(InstanceTypes=["p4d.24xlarge"], ProductDescriptions=["Linux/UNIX"],
                                              StartTime=now - 7 * 86400)["SpotPriceHistory"]
    # The change before StartTime is the price in force at the start, as EC2 documents.
    assert [(h["AvailabilityZone"], h["SpotPrice"], h["ProductDescription"]) for h in history] == [
        ("us-east-1b", "9.900000", "Linux/UNIX"), ("us-east-1b", "9.500000", "Linux/UNIX")]
    assert abs(history[0]["Timestamp"].timestamp() - (now - 3600)) < 1


def test_aws_capacity_blocks_are_offered_bought_once_and_listed_in_the_api_shape(proxy: Ec2FaultProxy) -> None:
    """The Capacity Block double (ec2_extras.py): what boto3 parses from it is the EC2 API reference's shape."""
    import botocore.exceptions as bex  # type: ignore[import-untyped]

    ec2 = _ec2(proxy.url)
    proxy.add_capacity_block_offering("us-east-1", "us-east-1b", "p5.48xlarge", 4, 48, 3110.40)
    proxy.add_capacity_block_offering("us-east-1", "us-east-1c", "p5.48xlarge", 8, 48, 6220.80)
    with pytest.raises(bex.ParamValidationError):  # CapacityDurationHours is required (botocore's own model)
        ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=4)
    offers = ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=4,
                                                   CapacityDurationHours=48)["CapacityBlockOfferings"]
    [offer] = offers
    assert (offer["AvailabilityZone"], offer["InstanceCount"], offer["CapacityBlockDurationHours"],
            offer["UpfrontFee"], offer["CurrencyCode"]) == ("us-east-1b", 4, 48, "3110.40", "USD")
    assert (offer["EndDate"] - offer["StartDate"]).total_seconds() == 48 * 3600
    assert ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=4,
                                                 CapacityDurationHours=24)["CapacityBlockOfferings"] == []
    tags = [{"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": "ml"}]}]
    bought = ec2.purchase_capacity_block(CapacityBlockOfferingId=offer["CapacityBlockOfferingId"],
                                         InstancePlatform="Linux/UNIX", TagSpecifications=tags)["CapacityReservation"]
    assert (bought["ReservationType"], bought["State"], bought["TotalInstanceCount"], bought["InstanceMatchCriteria"],
            bought["Tags"]) == ("capacity-block", "scheduled", 4, "targeted", [{"Key": "team", "Value": "ml"}])
    with pytest.raises(bex.ClientError) as again:  # an offering is bought once
        ec2.purchase_capacity_block(CapacityBlockOfferingId=offer["CapacityBlockOfferingId"],
                                    InstancePlatform="Linux/UNIX")
    assert again.value.response["Error"]["Code"] == "InvalidParameterValue"
    listed = ec2.describe_capacity_reservations(Filters=[{"Name": "tag:team", "Values": ["ml"]}])
    assert [r["CapacityReservationId"] for r in listed["CapacityReservations"]] == [bought["CapacityReservationId"]]
    assert ec2.describe_capacity_reservations(Filters=[{"Name": "tag:team", "Values": ["web"]}])[
        "CapacityReservations"] == []
