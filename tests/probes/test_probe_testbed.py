"""Probes against the network-namespace testbed: real sshd, ping and iperf3 over links of known truth.

One testbed of three zones (plus one faulty host in each) serves every test; the first full run is
shared, later tests make their own smaller runs. Needs root and the testbed's packages.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from probe_support import accepted_logins, sshd_log, validate_configmap, validate_crd_object, write_inventory
from typer.testing import CliRunner

from geosched.cli.probetargets import store_targets
from geosched.core.models import Job, Placement, pair_key
from geosched.files.documents import parse_network
from geosched.files.inventory import Inventory, load_inventory
from geosched.policies import PlacementContext, place
from geosched.probes import service
from geosched.probes.cli import make_app
from geosched.probes.engine import PlanOptions
from geosched.probes.failures import FailureKind
from geosched.probes.settings import Kind, PlanKind, ProbeSettings, RttMethod
from geosched.store.db import Store
from tests.output_support import valid
from tests.testbed import Link, SlowBanner, Testbed, Unreachable, WrongHostKey, missing_requirements, rtt_agrees

MISSING = missing_requirements()
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(MISSING), reason="network testbed unavailable: " + "; ".join(MISSING)),
]

ZONES = {"eu": 4, "us": 4, "ap": 3}
LINKS = {
    ("eu", "us"): Link(10, rate_mbit=100),  # RTT 20 ms
    ("eu", "ap"): Link(25, loss=0.03, rate_mbit=50),  # RTT 50 ms, ~6% of pings lost
    ("us", "ap"): Link(15, rate_mbit=25),  # RTT 30 ms
    ("us", "us"): Link(1.5, rate_mbit=200),  # a slow zone inside
    ("ap", "ap"): Link(0.3, loss=0.15, rate_mbit=50),  # a lossy one
    # Capped so that concurrent tests stay within what the userspace delay stage carries on a busy box.
    ("eu", "eu"): Link(0.2, rate_mbit=300),
}
FAULTS = {"eu-4": Unreachable(), "us-4": WrongHostKey(), "ap-3": SlowBanner(30.0)}
HEALTHY = ["eu-1", "eu-2", "eu-3", "us-1", "us-2", "us-3", "ap-1", "ap-2"]
GPUS = dict.fromkeys(HEALTHY, 8)
# iperf3 measures 3 s after 1 s omitted (iperf3's -O is a pre-test): inside the lossy zone, a test whose first
# segments wait out TCP's retransmission timeouts (1 s, then 2 s) can deliver nothing in a 2 s window (ap-1 -> ap-2
# did once in CI, stop 36); 3 s leaves it time to.
SETTINGS = ProbeSettings(connect_timeout_s=4.0, deadline_s=120.0, throughput_seconds=3, throughput_omit_s=1,
                         ping_count=20, ping_interval_s=0.05)


@pytest.fixture(scope="module")
def tb() -> Iterator[Testbed]:
    with Testbed(zones=ZONES, links=LINKS, faults=FAULTS, seed=11) as bed:
        yield bed


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("probes")


@pytest.fixture(scope="module")
def inventory(tb: Testbed, workdir: Path) -> Inventory:
    return load_inventory(write_inventory(tb, workdir / "inventory.yaml", gpus=GPUS))


class FirstRun:
    def __init__(self, outcome: service.RunOutcome, home: Path, wall_s: float, logins: dict[str, int]) -> None:
        self.outcome, self.home, self.wall_s, self.logins = outcome, home, wall_s, logins

    def store(self) -> Store:
        return Store(self.home)


@pytest.fixture(scope="module")
def first(tb: Testbed, inventory: Inventory, workdir: Path) -> FirstRun:
    home = workdir / "home"
    started = time.monotonic()
    with Store(home) as store:
        outcome = service.run(store, inventory.targets, SETTINGS, PlanOptions(kind=PlanKind.FULL, run=0),
                              known_hosts=[])
    wall = time.monotonic() - started
    # Counted now, before other tests open their own connections.
    logins = {name: accepted_logins(tb, name, source=tb.controller_address) for name in tb.hosts}
    print(f"first run: {wall:.1f}s, phases {dict(outcome.report.phase_s)}")
    return FirstRun(outcome, home, wall, logins)


def _zone(name: str) -> str:
    return name.rsplit("-", 1)[0]


# --- truth --------------------------------------------------------------------------------------------

def _reprobe_rtt(inventory: Inventory, workdir: Path, src: str, dst: str, attempt: int) -> tuple[float, ...]:
    """The pair's round trips measured again by the product, alone (a fresh store, RTT only)."""
    targets = [t for t in inventory.targets if t.name in (src, dst)]
    settings = ProbeSettings(kinds=frozenset({Kind.RTT}), ping_count=10)
    with Store(workdir / f"again-{src}-{dst}-{attempt}") as store:
        outcome = service.run(store, targets, settings, PlanOptions(kind=PlanKind.FULL, run=0), known_hosts=[])
    [echo] = outcome.report.echoes
    return echo.echo.rtts_ms


def test_rtt_of_every_healthy_pair_matches_the_truth(tb: Testbed, first: FirstRun, inventory: Inventory,
                                                     workdir: Path) -> None:
    report = first.outcome.report
    assert report.plan.kind is PlanKind.FULL
    assert {pair_key(r.src, r.dst) for r in report.echoes} == {
        pair_key(a, b) for i, a in enumerate(HEALTHY) for b in HEALTHY[i + 1:]}
    wrong = []
    for r in report.echoes:
        assert r.echo.method == "icmp"
        expected = tb.rtt_ms(_zone(r.src), _zone(r.dst))
        measured = [r.echo.rtts_ms]
        # A pair out of tolerance is measured again, alone, up to twice: on a loaded 2-core machine (CI runs the Go
        # build beside the tests) the scheduler can hold every reply of a pair for a millisecond or more during the
        # full-mesh run (seen: p50 1.42 ms on a 0.4 ms link). A probe that measures the wrong thing misses every time.
        while not rtt_agrees(measured[-1], expected) and len(measured) < 3:
            measured.append(_reprobe_rtt(inventory, workdir, r.src, r.dst, len(measured)))
        if not rtt_agrees(measured[-1], expected):
            wrong.append(f"{r.src}->{r.dst}: floors {', '.join(f'{min(m, default=0):.2f}' for m in measured)} ms, "
                         f"truth {expected} ms")
    assert not wrong, wrong


def test_loss_detected_where_set_and_only_there(tb: Testbed, first: FirstRun) -> None:
    with first.store() as store:
        view = store.network_view()
    for a in ZONES:
        for b in ZONES:
            link = view.zone_link(a, b)
            assert link is not None, (a, b)
            if tb.round_trip_loss(a, b) > 0:
                assert 0 < link.loss < 4 * tb.round_trip_loss(a, b), (a, b, link.loss)
            else:
                assert link.loss == 0.0, (a, b, link.loss)


def _reprobe_mbit(inventory: Inventory, workdir: Path, a: str, b: str, attempt: int) -> float:
    """Zone pair (a, b)'s throughput measured again by the product, alone: one iperf3 test between a host of each
    (two hosts of the zone when a == b), in a fresh store."""
    src, dst = f"{a}-1", (f"{b}-2" if a == b else f"{b}-1")
    targets = [t for t in inventory.targets if t.name in (src, dst)]
    settings = replace(SETTINGS, kinds=frozenset({Kind.THROUGHPUT}))
    with Store(workdir / f"again-tput-{a}-{b}-{attempt}") as store:
        outcome = service.run(store, targets, settings, PlanOptions(kind=PlanKind.FULL, run=0), known_hosts=[])
    [run] = outcome.report.throughputs
    return run.iperf.gbps * 1000


def test_throughput_ordered_and_near_the_caps(tb: Testbed, first: FirstRun, inventory: Inventory,
                                              workdir: Path) -> None:
    with first.store() as store:
        view = store.network_view()
    measured = {}
    for a, b in [("eu", "us"), ("eu", "ap"), ("us", "ap"), ("us", "us")]:
        link = view.zone_link(a, b)
        assert link is not None
        measured[(a, b)] = link.throughput_gbps * 1000
    order = sorted(measured, key=measured.get)  # type: ignore[arg-type]
    assert order == [("us", "ap"), ("eu", "ap"), ("eu", "us"), ("us", "us")], measured
    wrong = []
    for pair, mbit in measured.items():
        cap = tb.truth(*pair).rate_mbit
        assert cap is not None
        if tb.truth(*pair).loss == 0:
            # Out of tolerance: measured again, alone, up to twice. On a loaded 2-core machine iperf3 itself can be
            # starved of CPU during the full mesh (seen: 159 Mbit/s on a 200 Mbit/s cap at load 9); a probe that
            # measures the wrong thing misses every time.
            runs = [mbit]
            while not 0.8 * cap <= runs[-1] <= 1.2 * cap and len(runs) < 3:
                runs.append(_reprobe_mbit(inventory, workdir, *pair, len(runs)))
            if not 0.8 * cap <= runs[-1] <= 1.2 * cap:
                wrong.append(f"{pair}: {', '.join(f'{r:.0f}' for r in runs)} Mbit/s, cap {cap}")
    assert not wrong, wrong
    # iperf3 tests never shared a node or a zone-pair link, so none was halved.
    assert len(first.outcome.report.throughputs) == 6
    # Every one-off server is gone.
    assert [h for h in HEALTHY if tb.run(h, ["pgrep", "-x", "iperf3"]).stdout.strip()] == []


def test_store_holds_node_and_zone_series(first: FirstRun) -> None:
    outcome = first.outcome
    assert outcome.zone_samples == 6
    # Every measured pair of the 8 healthy hosts is stored (full mesh: 28); each also feeds its zone pair.
    assert outcome.node_samples == 28
    with first.store() as store:
        view = store.network_view()
    intra = {("eu-1", "eu-2"), ("eu-1", "eu-3"), ("eu-2", "eu-3"), ("us-1", "us-2"), ("us-1", "us-3"),
             ("us-2", "us-3"), ("ap-1", "ap-2")}
    assert intra < {pair_key(*k) for k in view.node_links} and len(view.node_links) == 28
    assert all(not view.is_stale(link) and link.samples >= 20 for link in view.node_links.values())


# --- placement on the measured view -------------------------------------------------------------------

def test_place_keeps_the_gang_in_the_fast_zone(inventory: Inventory, first: FirstRun) -> None:
    assert inventory.fleet is not None
    with first.store() as store:
        view = store.network_view()
    result = place(Job(name="gang", workers=3, gpus_per_worker=8), PlacementContext(inventory.fleet, view))
    assert isinstance(result, Placement), result
    assert result.zones == ("eu",)
    assert {a.node for a in result.assignments} == {"eu-1", "eu-2", "eu-3"}
    # A gang too big for one zone spans eu and its nearest zone, us (20 ms), not ap (50 ms, lossy).
    bigger = place(Job(name="big", workers=5, gpus_per_worker=8), PlacementContext(inventory.fleet, view))
    assert isinstance(bigger, Placement) and set(bigger.zones) == {"eu", "us"}


# --- faults -------------------------------------------------------------------------------------------

def test_each_fault_is_reported_by_name(first: FirstRun) -> None:
    failures = {f.subject: f for f in first.outcome.report.failures}
    assert set(failures) == {"eu-4", "us-4", "ap-3"}, failures
    assert failures["eu-4"].kind is FailureKind.UNREACHABLE
    assert failures["us-4"].kind is FailureKind.HOST_KEY_MISMATCH
    assert failures["ap-3"].kind is FailureKind.TIMEOUT
    assert all("AAAA" not in f.reason for f in failures.values())


def test_wrong_host_key_refused_before_any_authentication(tb: Testbed, first: FirstRun) -> None:
    assert first.outcome.report.connections.get("us-4", 0) == 0
    log = sshd_log(tb, "us-4")
    assert f"Connection from {tb.controller_address}" in log
    assert "Host key is not trusted" in log
    # No public key was offered, let alone accepted: the client stopped at key exchange.
    assert not re.search(r"publickey|Accepted|Postponed|userauth", log), log


def test_one_ssh_connection_per_host_per_run(first: FirstRun) -> None:
    assert first.outcome.report.connections == dict.fromkeys(HEALTHY, 1)
    assert {n: c for n, c in first.logins.items() if c} == dict.fromkeys(HEALTHY, 1)


def test_slow_sshd_cannot_hold_the_run_past_its_deadline(tb: Testbed, inventory: Inventory, workdir: Path) -> None:
    # The handshake timeout alone would wait a minute; the run's 12 s deadline wins.
    settings = ProbeSettings(kinds=frozenset({Kind.RTT}), connect_timeout_s=60.0, deadline_s=12.0, ping_count=5,
                             ping_interval_s=0.05)
    targets = [t for t in inventory.targets if t.name in ("eu-1", "us-1", "ap-1", "ap-3")]
    started = time.monotonic()
    with Store(workdir / "deadline-home") as store:
        outcome = service.run(store, targets, settings, PlanOptions(kind=PlanKind.FULL, run=0), known_hosts=[])
    wall = time.monotonic() - started
    assert wall <= settings.deadline_s + 1.5, wall
    failures = {f.subject: f.kind for f in outcome.report.failures}
    assert failures == {"ap-3": FailureKind.TIMEOUT}
    assert len(outcome.report.echoes) == 3  # the healthy nodes were still measured


# --- methods, jump hosts, host key pinning --------------------------------------------------------------

def test_tcp_rtt_stands_in_where_icmp_is_filtered(tb: Testbed, inventory: Inventory, workdir: Path) -> None:
    names = ("eu-1", "us-1")
    targets = [t for t in inventory.targets if t.name in names]
    # Both ignore echo requests, whichever of them the plan makes the source: ICMP "filtered".
    for name in names:
        tb.run(name, ["sysctl", "-q", "-w", "net.ipv4.icmp_echo_ignore_all=1"], check=True)
    try:
        settings = ProbeSettings(kinds=frozenset({Kind.RTT}), ping_count=10, ping_reply_timeout_s=0.5)
        with Store(workdir / "tcp-home") as store:
            outcome = service.run(store, targets, settings, PlanOptions(kind=PlanKind.FULL, run=0), known_hosts=[])
    finally:
        for name in names:
            tb.run(name, ["sysctl", "-q", "-w", "net.ipv4.icmp_echo_ignore_all=0"], check=True)
    [echo] = outcome.report.echoes
    assert echo.echo.method == "tcp" and echo.echo.received == 10
    assert rtt_agrees(echo.echo.rtts_ms, tb.rtt_ms("eu", "us")), echo.echo.rtts_ms
    assert echo.echo.p50_ms == pytest.approx(statistics.median(echo.echo.rtts_ms), abs=0.001)


def test_forced_tcp_method_matches_ping(tb: Testbed, inventory: Inventory, workdir: Path) -> None:
    targets = [t for t in inventory.targets if t.name in ("eu-2", "ap-1")]
    settings = ProbeSettings(kinds=frozenset({Kind.RTT}), rtt_method=RttMethod.TCP, ping_count=8)
    with Store(workdir / "tcp2-home") as store:
        outcome = service.run(store, targets, settings, PlanOptions(kind=PlanKind.FULL, run=0), known_hosts=[])
    [echo] = outcome.report.echoes
    assert echo.echo.method == "tcp"
    assert rtt_agrees(echo.echo.rtts_ms, tb.rtt_ms("eu", "ap")), echo.echo.rtts_ms


def test_jump_host_reaches_a_node_through_its_pooled_connection(tb: Testbed, workdir: Path) -> None:
    path = write_inventory(tb, workdir / "jump.yaml", jumps={"us-2": "eu-1"})
    targets = [t for t in load_inventory(path).targets if t.name in ("eu-1", "us-2")]
    before = accepted_logins(tb, "us-2", source=tb.host("eu-1").address)
    with Store(workdir / "jump-home") as store:
        outcome = service.run(store, targets, ProbeSettings(kinds=frozenset({Kind.RTT}), ping_count=5),
                              PlanOptions(kind=PlanKind.FULL, run=0), known_hosts=[])
    assert not outcome.report.failures and len(outcome.report.echoes) == 1
    assert outcome.report.connections == {"eu-1": 1, "us-2": 1}
    # us-2's sshd saw the session arrive from the jump host, not from the controller.
    assert accepted_logins(tb, "us-2", source=tb.host("eu-1").address) == before + 1


def test_unknown_host_keys_are_refused_unless_trusted_on_first_use(tb: Testbed, workdir: Path) -> None:
    path = write_inventory(tb, workdir / "nokeys.yaml", pin_keys=False)
    targets = [t for t in load_inventory(path).targets if t.name in ("eu-3", "ap-2")]
    home = workdir / "tofu-home"
    logins = accepted_logins(tb, "eu-3")
    settings = ProbeSettings(kinds=frozenset({Kind.RTT}), ping_count=5)
    with Store(home) as store:
        refused = service.run(store, targets, settings, PlanOptions(kind=PlanKind.FULL, run=0), known_hosts=[])
        assert {f.kind for f in refused.report.failures} == {FailureKind.HOST_KEY_UNKNOWN}
        assert accepted_logins(tb, "eu-3") == logins and not (home / "known_hosts").exists()

        tofu = replace_settings(settings, trust_on_first_use=True)
        pinned = service.run(store, targets, tofu, PlanOptions(kind=PlanKind.FULL, run=1), known_hosts=[])
        assert not pinned.report.failures
        lines = (home / "known_hosts").read_text().splitlines()
        assert sorted(lines) == sorted(f"{tb.host(n).address} {tb.host(n).served_host_key}" for n in ("eu-3", "ap-2"))

        again = service.run(store, targets, settings, PlanOptions(kind=PlanKind.FULL, run=2), known_hosts=[])
        assert not again.report.failures and len(again.report.echoes) == 1


def test_probe_run_gang_measures_a_provisioned_gang_from_the_store(tb: Testbed, workdir: Path) -> None:
    """provision -> probe without writing a file by hand (issue 15): the store kept the inventory (addresses,
    users, keys, pinned host keys) when the ssh provider leased the gang, so `probe run --gang` needs no file."""
    home = workdir / "gang-home"
    inventory = write_inventory(tb, workdir / "gang.yaml", gpus=GPUS)
    env = {**os.environ, "GEOSCHED_HOME": str(home)}
    launched = subprocess.run([sys.executable, "-m", "geosched", "provision", "--provider", "ssh", "--inventory",
                               str(inventory), "--gpu", "A100:8", "--nodes", "3", "--yes", "-o", "json"],
                              capture_output=True, text=True, env=env, timeout=120)
    assert launched.returncode == 0, launched.stderr
    doc = json.loads(launched.stdout)
    gang = doc["gang"]
    # eu and us are the zones with three healthy GPU hosts; eu comes first by name at equal prices.
    assert sorted(n["provider_id"] for n in doc["nodes"]) == ["eu-1", "eu-2", "eu-3"]
    inventory.unlink()  # the store is the memory now

    app = make_app(lambda: Store(home), store_targets)
    result = CliRunner().invoke(app, ["run", "--gang", gang, "--plan", "full", "--kinds", "rtt", "--ping-count", "5",
                                      "--known-hosts", str(workdir / "none"), "-o", "json"])
    assert result.exit_code == 0, result.output
    report = valid(json.loads(result.stdout))
    assert report["failures"] == []
    with Store(home) as store:
        pairs = {k for k in store.network_view().node_links}
    # Every pair of the gang, measured over the pinned host keys; nothing outside the gang.
    assert pairs == {pair_key(a, b) for a, b in (("eu-1", "eu-2"), ("eu-1", "eu-3"), ("eu-2", "eu-3"))}

    unknown = CliRunner().invoke(app, ["run", "--gang", "nope", "--kinds", "rtt"])
    assert unknown.exit_code != 0 and "no machines of gang 'nope'" in str(unknown.exception)


def replace_settings(settings: ProbeSettings, **changes: object) -> ProbeSettings:
    import dataclasses

    return dataclasses.replace(settings, **changes)  # type: ignore[arg-type]


# --- exports and the CLI ------------------------------------------------------------------------------

def test_exports_validate(tb: Testbed, inventory: Inventory, first: FirstRun, workdir: Path) -> None:
    out = workdir / "exports"
    paths = {"networktopology": out / "nt.yaml", "configmap": out / "cm.yaml", "snapshot": out / "network.json"}
    with first.store() as store:
        written = service.export(store, service.inventory_nodes(inventory), paths)
    assert sorted(written) == sorted(paths.values())
    nt = yaml.safe_load(paths["networktopology"].read_text())
    validate_crd_object(nt)
    [weights] = nt["spec"]["weights"]
    zone_list = weights["topologyList"][1]["originList"]
    eu = next(o for o in zone_list if o["origin"] == "eu")
    costs = {c["destination"]: c["networkCost"] for c in eu["costList"]}
    with first.store() as store:
        view = store.network_view()
    for zone, cost in costs.items():
        link = view.zone_link("eu", zone)
        assert link is not None and cost == max(1, round(link.rtt_p95_ms))
        # p95, so at or above the truth; on a loaded machine the tail grows a little.
        assert tb.rtt_ms("eu", zone) <= cost <= 1.3 * tb.rtt_ms("eu", zone) + 2, (zone, cost)
    assert set(costs) == {"us", "ap"}
    cm = yaml.safe_load(paths["configmap"].read_text())
    validate_configmap(cm)
    # Every ordered pair of inventory nodes, faulty ones included (estimated from their zone pairs).
    assert len(cm["data"]) == 11 * 10
    assert inventory.fleet is not None
    parse_network(json.loads(paths["snapshot"].read_text()), "snapshot", inventory.fleet)


def test_cli_run_show_export(tb: Testbed, workdir: Path) -> None:
    home = workdir / "cli-home"
    path = write_inventory(tb, workdir / "cli.yaml", gpus=GPUS)
    app = make_app(lambda: Store(home), store_targets)
    runner = CliRunner()
    ran = runner.invoke(app, ["run", "--inventory", str(path), "--plan", "sampled", "--kinds", "rtt,loss",
                              "--deadline", "40", "--connect-timeout", "3", "--ping-count", "5", "--output", "json"])
    assert ran.exit_code == 0, ran.output
    doc = valid(json.loads(ran.stdout[ran.stdout.index("{"):]))
    assert doc["plan"] == "sampled" and doc["stored"]["zone_samples"] == 6
    assert {f["subject"]: f["kind"] for f in doc["failures"]} == {
        "eu-4": "unreachable", "us-4": "host-key-mismatch", "ap-3": "timeout"}

    shown = runner.invoke(app, ["show", "--inventory", str(path), "--output", "json", "--heatmap",
                                str(workdir / "rtt.png")])
    assert shown.exit_code == 0, shown.output
    rows = valid(json.loads(shown.stdout[shown.stdout.index("{"):]))["items"]
    assert rows and all({"src", "dst", "src_zone", "dst_zone", "rtt_ms", "loss", "throughput_gbps", "samples",
                         "age_s"} <= set(r) for r in rows)
    assert (workdir / "rtt.png").read_bytes()[:4] == b"\x89PNG"

    table = runner.invoke(app, ["run", "--inventory", str(path), "--kinds", "rtt", "--deadline", "30",
                                "--connect-timeout", "3", "--ping-count", "5"])
    assert table.exit_code == 0, table.output
    for name, kind in (("eu-4", "unreachable"), ("us-4", "host-key-mismatch"), ("ap-3", "timeout")):
        assert re.search(rf"{name}\s.*{kind}", table.stdout), table.stdout

    nt = workdir / "cli-nt.yaml"
    exported = runner.invoke(app, ["export", "--inventory", str(path), "--networktopology", str(nt),
                                   "--configmap", str(workdir / "cli-cm.json"), "--snapshot", str(workdir / "s.yaml")])
    assert exported.exit_code == 0, exported.output
    validate_crd_object(yaml.safe_load(nt.read_text()))
    with contextlib.suppress(FileNotFoundError):
        assert json.loads((workdir / "cli-cm.json").read_text())["kind"] == "ConfigMap"
