"""Journal, resume, down and sweep: a crash at any point leaves nothing the store does not know about, and
`resume` or `down` finishes the job. Crashes here are in-process (an exception no code catches, at chosen
points); test_prov_campaign.py kills real processes with SIGKILL."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from geosched.providers import journal, lifecycle
from geosched.providers.aws import AwsProvider
from geosched.providers.base import Budget, Instance, InstanceState, LaunchSpec, Provider
from geosched.providers.gang import provision, resume
from geosched.providers.gcp import GcpProvider
from geosched.providers.plan import GangRequest
from geosched.store.db import Store
from geosched_emulators import Ec2FaultProxy, GceDouble, MotoServer
from tests.providers.prov_support import AWS_REGIONS, GCP_REGIONS, aws_alive, fast_settings, gce_alive, moto_client

pytestmark = pytest.mark.integration


class Crash(BaseException):
    """Stands for the process dying: nothing in geosched catches a BaseException that is not an Exception."""


class Crashing:
    """A provider that dies at one point of its life, once."""

    def __init__(self, inner: Provider, point: str) -> None:
        self.inner = inner
        self.point = point
        self.name = inner.name

    def __getattr__(self, attr: str) -> object:
        return getattr(self.inner, attr)

    def launch(self, spec: LaunchSpec, budget: Budget) -> tuple[Instance, ...]:
        if self.point == "before-launch":
            self.point = ""
            raise Crash
        if self.point == "half-launch":  # GCE inserts one machine per call: the process died between them
            self.point = ""
            self.inner.launch(replace(spec, names=spec.names[: len(spec.names) - 1]), budget)
            raise Crash
        launched = self.inner.launch(spec, budget)
        if self.point == "after-launch":
            self.point = ""
            raise Crash
        if self.point == "while-waiting":  # still booting: the gang code has to poll
            return tuple(replace(i, state=InstanceState.PENDING) for i in launched)
        return launched

    def describe(self, gang: str | None, regions: Iterable[str], budget: Budget) -> tuple[Instance, ...]:
        found = self.inner.describe(gang, regions, budget)
        if self.point == "while-waiting":
            self.point = ""
            raise Crash
        return found

    def terminate(self, instances: Sequence[Instance], budget: Budget) -> None:
        if self.point == "before-rollback":
            self.point = ""
            raise Crash
        self.inner.terminate(instances, budget)


def request(nodes: int, providers: tuple[str, ...]) -> GangRequest:
    return GangRequest("A100", 8, nodes, providers=providers, regions=AWS_REGIONS + GCP_REGIONS)


def crash_then(store: Store, provider: Provider, point: str, nodes: int = 3) -> str:
    crashing = Crashing(provider, point)
    with pytest.raises(Crash):
        provision(request(nodes, (provider.name,)), {provider.name: crashing}, store,  # type: ignore[dict-item]
                  fast_settings(zone_timeout_s=60.0), gang="gang-crash01")  # no deadline under test here
    return "gang-crash01"


def alive(provider: Provider, gang: str, moto: MotoServer | None, gce: GceDouble | None) -> dict[str, str]:
    if provider.name == "aws":
        assert moto is not None
        return aws_alive(moto.url, gang)
    assert gce is not None
    return gce_alive(gce, gang)


def known_ids(store: Store, gang: str) -> set[str]:
    return {r.provider_id for r in journal.instances(store, gang=gang, states=("launched",)) if r.provider_id}


def open_rows(store: Store, gang: str) -> list[journal.InstanceRecord]:
    return journal.instances(store, gang=gang, states=("intent", "terminating"))


@pytest.mark.parametrize("point", ["before-launch", "after-launch", "while-waiting"])
@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_crash_then_resume_completes_the_gang(cloud: str, point: str, aws: AwsProvider, gcp: GcpProvider,
                                              moto: MotoServer, gce: GceDouble, proxy: Ec2FaultProxy,
                                              store: Store) -> None:
    provider: Provider = aws if cloud == "aws" else gcp
    gang = crash_then(store, provider, point)
    assert journal.gang_record(store, gang) is not None
    # The intent was written before the call, so the journal holds every node the crashed run asked for.
    assert len(journal.instances(store, gang=gang, states=("intent", "launched"))) == 3
    launches = proxy.call_count("RunInstances") + gce.call_count("instances.insert")
    settings = fast_settings(lifecycle=fast_settings().lifecycle.__class__(settle_s=0.2, poll_s=0.05))
    result = resume(gang, {cloud: provider}, store, settings)
    assert result.ok, result.message
    up = alive(provider, gang, moto, gce)
    assert len(up) == 3 and len(set(up.values())) == 1
    assert known_ids(store, gang) == set(up)
    assert not open_rows(store, gang)
    relaunched = proxy.call_count("RunInstances") + gce.call_count("instances.insert") - launches
    outcomes = [(a.seq, a.outcome) for a in result.attempts]
    if point == "before-launch":
        assert relaunched > 0 and outcomes == [(1, "interrupted"), (2, "launched")]
    else:
        assert relaunched == 0  # the machines the crashed run launched were adopted, not launched again
        assert outcomes == [(1, "launched")] and result.attempts[0].message == "adopted after a restart"
    down = lifecycle.down(store, {cloud: provider}, gang, settings.lifecycle)
    assert down.state == "terminated"
    assert alive(provider, gang, moto, gce) == {} and not journal.instances(store, gang=gang,
                                                                            states=journal.OPEN_STATES)


@pytest.mark.parametrize("point", ["before-launch", "after-launch", "while-waiting", "before-rollback"])
def test_crash_then_down_leaves_nothing(point: str, gcp: GcpProvider, gce: GceDouble, store: Store) -> None:
    if point == "before-rollback":
        gce.set_capacity("europe-west4-a", "a2-highgpu-8g", 2)  # a partial gang whose rollback dies
    gang = crash_then(store, gcp, point)
    assert set(gce_alive(gce, gang)) <= {r.name for r in journal.instances(store, gang=gang)}
    down = lifecycle.down(store, {"gcp": gcp}, gang, fast_settings().lifecycle.__class__(settle_s=0.2, poll_s=0.05))
    assert down.state == "terminated", down.errors
    assert gce_alive(gce, gang) == {}
    assert not journal.instances(store, gang=gang, states=journal.OPEN_STATES)
    assert journal.gang_record(store, gang).state == "terminated"  # type: ignore[union-attr]


def test_attempt_log_says_what_was_tried_in_order_and_why(gcp: GcpProvider, gce: GceDouble, store: Store) -> None:
    from geosched_emulators import GceFault

    gce.inject(GceFault.zone_resource_pool_exhausted(), zone="europe-west4-a", times="always")
    gce.inject(GceFault.quota_exceeded("NVIDIA_A100_GPUS", 0), zone="europe-west4-b", times="always")
    result = provision(request(2, ("gcp",)), {"gcp": gcp}, store, fast_settings())
    log = [(a.seq, a.zone, a.outcome, a.error_kind, a.error_code) for a in journal.attempts(store, result.gang)]
    assert log == [(1, "europe-west4-a", "failed", "capacity", "ZONE_RESOURCE_POOL_EXHAUSTED"),
                   (2, "europe-west4-b", "failed", "quota", "QUOTA_EXCEEDED"),
                   (3, "us-central1-a", "launched", None, None)]
    first = journal.attempts(store, result.gang)[0]
    assert "does not have enough resources" in (first.message or "") and first.api_calls >= 2
    blocks = journal.active_blocks(store)
    assert {(b.kind, b.scope) for b in blocks} == {("capacity", "zone"), ("quota", "region")}
    nodes = lifecycle.fleet_nodes(store)
    assert {n.provider_id for n in nodes} == set(gce_alive(gce, result.gang))
    # Not (yet) a Kubernetes node: no Kubernetes labels made up for it, only its gang.
    assert all(dict(n.labels) == {"geosched.io/gang": result.gang} for n in nodes)
    lifecycle.down(store, {"gcp": gcp}, result.gang, fast_settings().lifecycle)
    assert lifecycle.fleet_nodes(store) == ()


def test_sweep_finds_untracked_instances_and_terminates_only_ours(aws: AwsProvider, gcp: GcpProvider,
                                                                  moto: MotoServer, gce: GceDouble, store: Store,
                                                                  tmp_path: Path) -> None:
    me = journal.owner(store)
    tracked = provision(request(1, ("aws",)), {"aws": aws}, store, fast_settings())
    ec2 = moto_client(moto.url)
    ami = aws._ami("us-east-1", Budget(30.0))

    def launch_tagged(owner: str, gang: str) -> str:
        tags = [{"Key": "geosched-gang", "Value": gang}, {"Key": "geosched-owner", "Value": owner}]
        out = ec2.run_instances(ImageId=ami, InstanceType="p4d.24xlarge", MinCount=1, MaxCount=1,
                                TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])
        return str(out["Instances"][0]["InstanceId"])

    orphan = launch_tagged(me, "gang-lost0001")  # e.g. a store that was deleted
    foreign = launch_tagged("o-someone-else", "gang-theirs01")
    stray = launch_tagged(me, tracked.gang)  # tagged with a gang we know, but with no row
    providers: dict[str, Provider] = {"aws": aws, "gcp": gcp}
    regions = {"aws": ["us-east-1"], "gcp": []}
    found = lifecycle.sweep(store, providers, regions=regions)
    assert [i.provider_id for i in found.orphans] == [orphan]
    assert foreign in {i.provider_id for i in found.foreign}  # (other tests' leftovers may be there too)
    assert found.reconciled == (tracked.gang,)
    assert tracked.gang and orphan in aws_alive(moto.url, owner=me)  # listing terminates nothing
    done = lifecycle.sweep(store, providers, regions=regions, terminate=True)
    assert done.terminated == 1 and not done.errors
    assert orphan not in aws_alive(moto.url) and stray not in aws_alive(moto.url)
    assert foreign in aws_alive(moto.url)
    assert orphan in journal.known_ids(store, "aws") and stray in journal.known_ids(store, "aws")
    assert set(aws_alive(moto.url, tracked.gang)) == known_ids(store, tracked.gang)  # the gang itself kept
    again = lifecycle.sweep(store, providers, regions=regions)
    assert again.orphans == () and again.reconciled == ()
    ec2.terminate_instances(InstanceIds=[foreign])
    lifecycle.down(store, providers, tracked.gang, fast_settings().lifecycle)


def test_down_unknown_gang_and_resume_unknown_gang(aws: AwsProvider, store: Store) -> None:
    from geosched.core.errors import InputError

    assert not lifecycle.down(store, {"aws": aws}, "gang-nothere1").known
    with pytest.raises(InputError):
        resume("gang-nothere1", {"aws": aws}, store)


@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_resume_of_a_ready_gang_that_lost_nodes_fills_it_up(cloud: str, aws: AwsProvider, gcp: GcpProvider,
                                                           moto: MotoServer, gce: GceDouble, proxy: Ec2FaultProxy,
                                                           store: Store) -> None:
    """Issue 15: a resume used to terminate the survivors and start over; it now launches only what is missing,
    in the survivors' zone, and keeps them."""
    provider: Provider = aws if cloud == "aws" else gcp
    result = provision(request(3, (cloud,)), {cloud: provider}, store, fast_settings())
    before = alive(provider, result.gang, moto, gce)
    lost = sorted(before)[0]
    if cloud == "aws":  # a spot reclaim, say
        moto_client(moto.url, result.candidate.region if result.candidate else "").terminate_instances(
            InstanceIds=[lost])
    else:
        gce.remove_instance("geosched-test", before[lost], lost)
    launches = proxy.call_count("RunInstances") + gce.call_count("instances.insert")
    again = resume(result.gang, {cloud: provider}, store, fast_settings())
    assert again.ok, again.message
    up = alive(provider, result.gang, moto, gce)
    # The two survivors are kept, one machine is added beside them, nothing else is launched or terminated.
    assert len(up) == 3 and lost not in up and set(before) - {lost} <= set(up)
    assert len(set(up.values())) == 1 and known_ids(store, result.gang) == set(up)
    assert proxy.call_count("RunInstances") + gce.call_count("instances.insert") - launches == 1
    assert [a.outcome for a in again.attempts] == ["launched", "launched"]
    assert again.message.startswith("filled up: 1 new of 3")
    lifecycle.down(store, {cloud: provider}, result.gang, fast_settings().lifecycle)
    assert alive(provider, result.gang, moto, gce) == {}


def test_resume_after_half_landed_inserts_creates_only_the_missing(gcp: GcpProvider, gce: GceDouble,
                                                                   store: Store) -> None:
    """Issue 15: a GCP gang whose inserts half landed before the process died was terminated and started over."""
    gang = crash_then(store, gcp, "half-launch")
    landed = gce_alive(gce, gang)
    assert len(landed) == 2
    inserts = gce.call_count("instances.insert")
    settings = fast_settings(lifecycle=fast_settings().lifecycle.__class__(settle_s=0.2, poll_s=0.05))
    result = resume(gang, {"gcp": gcp}, store, settings)
    assert result.ok, result.message
    up = gce_alive(gce, gang)
    assert len(up) == 3 and set(landed) <= set(up) and len(set(up.values())) == 1
    assert gce.call_count("instances.insert") - inserts == 1 and known_ids(store, gang) == set(up)
    assert not open_rows(store, gang)
    lifecycle.down(store, {"gcp": gcp}, gang, settings.lifecycle)
    assert gce_alive(gce, gang) == {}


def test_a_launch_landing_after_the_settle_window_is_caught_by_the_next_reconcile(
        aws: AwsProvider, proxy: Ec2FaultProxy, moto: MotoServer, store: Store) -> None:
    from geosched_emulators import Ec2Fault

    proxy.inject(Ec2Fault.stall(1.5), zone="us-east-1b", action="RunInstances")
    settings = fast_settings(zone_timeout_s=1.0, call_timeout_s=1.0,
                             lifecycle=fast_settings().lifecycle.__class__(settle_s=0.2, poll_s=0.05))
    result = provision(request(2, ("aws",)), {"aws": aws}, store, settings)
    assert [a.outcome for a in result.attempts] == ["failed", "launched"]
    deadline = time.monotonic() + 5.0
    while len(aws_alive(moto.url, result.gang)) < 4 and time.monotonic() < deadline:
        time.sleep(0.1)  # real sleep: polling moto until the stalled launch lands
    # The stalled request landed after its intents were closed as "never appeared": the machines are still
    # tagged with the gang and attempt, so the next reconcile adopts and terminates them.
    assert len(aws_alive(moto.url, result.gang)) == 4
    report = lifecycle.reconcile(store, {"aws": aws}, result.gang, "keep", settings.lifecycle)
    assert report.terminated == 2 and report.alive_in_keeper == 2
    assert set(aws_alive(moto.url, result.gang)) == known_ids(store, result.gang)
    lifecycle.down(store, {"aws": aws}, result.gang, settings.lifecycle)
