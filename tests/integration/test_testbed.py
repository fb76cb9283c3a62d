"""Integration tests of the network-namespace testbed itself (tests/testbed).

They measure the ground truth directly with ping and iperf3 run via `ip netns exec`,
exercise ssh with strict host key checking, the three fault modes and teardown.
Needs root, iproute2 with `ip netns`, openssh-server/client, iperf3, iputils-ping, gcc.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.testbed import (
    Fault,
    Host,
    Link,
    SlowBanner,
    Testbed,
    TestbedError,
    Unreachable,
    WrongHostKey,
    cleanup_stale,
    missing_requirements,
    rtt_agrees,
)
from tests.testbed.netns import guard_route_slots, list_netns, pids_in_netns, root_links_with_prefix

MISSING = missing_requirements()
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(MISSING), reason="network testbed unavailable: " + "; ".join(MISSING)),
]

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCHMARK_NET = ipaddress.IPv4Network("198.18.0.0/15")
SLOW_BANNER_S = 2.0

ZONES = {"eu": 3, "us": 3, "ap": 3, "sa": 2}
LINKS = {
    ("eu", "us"): Link(20, rate_mbit=200),
    ("eu", "ap"): Link(30, rate_mbit=100),
    ("us", "ap"): Link(10, rate_mbit=50),
    # Asymmetric on purpose: only replies from sa to eu are lost.
    ("eu", "sa"): Link(5),
    ("sa", "eu"): Link(5, loss=0.10),
}
FAULTS: dict[str, Fault] = {"eu-3": Unreachable(), "us-3": WrongHostKey(), "ap-3": SlowBanner(SLOW_BANNER_S)}


@pytest.fixture(scope="module")
def tb() -> Iterator[Testbed]:
    with Testbed(zones=ZONES, links=LINKS, default_link=Link(40), faults=FAULTS, seed=7) as bed:
        yield bed


def _pair_hosts(tb: Testbed, zone_a: str, zone_b: str) -> tuple[Host, Host]:
    src = tb.zone_hosts(zone_a, healthy=True)[0]
    dst = tb.zone_hosts(zone_b, healthy=True)[-1]
    assert src is not dst
    return src, dst


def _ping(tb: Testbed, src: Host, dst: Host, count: int, interval: float) -> tuple[int, list[float]]:
    """Returns (received, per-reply RTTs in ms)."""
    proc = tb.run(
        src,
        ["ping", "-n", "-c", str(count), "-i", str(interval), "-W", "2", dst.address],
        timeout=count * interval + 30,
    )
    received = re.search(r"(\d+) received", proc.stdout)
    assert received, proc.stdout + proc.stderr
    rtts = [float(m) for m in re.findall(r"time=([\d.]+) ms", proc.stdout)]
    return int(received.group(1)), rtts


def _iperf(tb: Testbed, src: Host, dst: Host, seconds: int = 3) -> float:
    """TCP goodput src -> dst in Mbit/s as the iperf3 receiver saw it."""
    server = tb.popen(dst, ["iperf3", "-s", "-1", "-p", "5201"], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not tb.run(dst, ["ss", "-Hltn", "sport = :5201"]).stdout.strip():
        assert server.poll() is None, "iperf3 server died"
        assert time.monotonic() < deadline, "iperf3 server not listening"
        time.sleep(0.05)  # real sleep: polling a real iperf3 server until it listens
    client = tb.run(
        src,
        ["iperf3", "-c", dst.address, "-p", "5201", "-t", str(seconds), "-O", "1", "-J"],
        timeout=seconds + 30,
    )
    assert client.returncode == 0, client.stdout[-2000:] + client.stderr
    server.wait(timeout=10)
    result = json.loads(client.stdout)
    return float(result["end"]["sum_received"]["bits_per_second"]) / 1e6


# --------------------------------------------------------------------------- layout


def test_hosts_addresses_and_keys(tb: Testbed) -> None:
    block = ipaddress.IPv4Network(tb.block)
    assert block.subnet_of(BENCHMARK_NET)
    addresses = [h.address for h in tb.hosts.values()] + [tb.controller_address]
    assert len(set(addresses)) == len(addresses)
    assert all(ipaddress.IPv4Address(a) in block for a in addresses)
    assert {h.zone for h in tb.hosts.values()} == set(ZONES)
    known = tb.known_hosts.read_text().splitlines()
    for h in tb.hosts.values():
        assert h.host_key.startswith("ssh-ed25519 AAAA")
        assert f"{h.address} {h.host_key}" in known
        assert h.key_path.exists() and h.known_hosts == tb.known_hosts
        assert (h.host_key == h.served_host_key) is not isinstance(h.fault, WrongHostKey)
        assert (h.netns is None) is isinstance(h.fault, Unreachable)
    assert tb.truth("sa", "eu").loss == 0.10 and tb.truth("eu", "sa").loss == 0.0
    assert tb.truth("us", "eu") == LINKS[("eu", "us")]
    assert tb.truth("us", "sa") == Link(40)
    with pytest.raises(TestbedError):
        tb.run("eu-3", ["true"])


# --------------------------------------------------------------------------- ground truth


def test_rtt_agreement_reads_the_floor_so_a_busy_host_passes_and_a_wrong_link_does_not() -> None:
    assert rtt_agrees([2.05, 0.41, 1.9, 0.44], 0.4)  # replies held by a loaded scheduler, one not
    assert rtt_agrees([29.0, 23.9, 20.36, 24.1], 20)
    assert not rtt_agrees([23.9, 24.0, 23.5], 20)  # every reply late: 3.5 ms more than the link
    assert not rtt_agrees([0.1, 0.2], 20)  # the stage did not delay at all
    assert not rtt_agrees([], 0.4)


@pytest.mark.parametrize(
    ("zone_a", "zone_b"),
    [("eu", "us"), ("eu", "ap"), ("us", "ap"), ("eu", "sa"), ("ap", "sa"), ("eu", "eu"), ("sa", "sa")],
)
def test_ping_rtt_matches_truth(tb: Testbed, zone_a: str, zone_b: str) -> None:
    src, dst = _pair_hosts(tb, zone_a, zone_b)
    _, rtts = _ping(tb, src, dst, count=11, interval=0.05)
    assert len(rtts) >= 6
    # The first echo also pays for ARP resolution on two links.
    expected = tb.rtt_ms(zone_a, zone_b)
    assert rtt_agrees(rtts[1:], expected), f"{zone_a}->{zone_b}: {rtts[1:]} ms, truth {expected} ms"


def test_loss_visible_where_set_and_only_there(tb: Testbed) -> None:
    count = 200
    src, dst = _pair_hosts(tb, "eu", "sa")
    before = tb.stage_stats()
    received, _ = _ping(tb, src, dst, count=count, interval=0.01)
    p = tb.round_trip_loss("eu", "sa")
    lost = count - received
    sigma = math.sqrt(count * p * (1 - p))
    assert abs(lost - count * p) <= 4.5 * sigma, f"lost {lost}/{count}, expected about {count * p}"
    after = tb.stage_stats()
    # Requests eu->sa are never dropped, replies sa->eu are.
    assert after["eu->sa"]["lost"] == before.get("eu->sa", {}).get("lost", 0)
    assert after["sa->eu"]["lost"] > before.get("sa->eu", {}).get("lost", 0)

    src, dst = _pair_hosts(tb, "eu", "us")
    received, _ = _ping(tb, src, dst, count=count, interval=0.01)
    assert received == count


def test_bandwidth_caps_hold_and_order(tb: Testbed) -> None:
    measured: dict[tuple[str, str], float] = {}
    for pair in [("us", "ap"), ("eu", "ap"), ("eu", "us")]:
        src, dst = _pair_hosts(tb, *pair)
        cap = tb.truth(*pair).rate_mbit
        assert cap is not None
        measured[pair] = _iperf(tb, src, dst)
        assert 0.8 * cap <= measured[pair] <= 1.2 * cap, f"{pair}: {measured[pair]:.1f} Mbit/s, cap {cap}"
    assert measured[("us", "ap")] < measured[("eu", "ap")] < measured[("eu", "us")]


def test_stage_carries_a_few_hundred_mbit(tb: Testbed, record_property: Callable[[str, object], None]) -> None:
    # Intra-zone has no rate cap, so this is the stage's own ceiling (plus veths/TCP).
    src, dst = _pair_hosts(tb, "eu", "eu")
    mbit = _iperf(tb, src, dst)
    record_property("stage_mbit", round(mbit))
    print(f"stage throughput, uncapped intra-zone TCP: {mbit:.0f} Mbit/s")
    assert mbit >= 250


# --------------------------------------------------------------------------- ssh


def test_ssh_strict_host_key_to_every_healthy_host(tb: Testbed) -> None:
    hosts = tb.healthy_hosts()
    procs = {
        h.name: subprocess.Popen(
            h.ssh_argv(["ip", "-o", "-4", "addr", "show", "dev", "eth0"]),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        for h in hosts
    }
    for h in hosts:
        out, err = procs[h.name].communicate(timeout=30)
        assert procs[h.name].returncode == 0, f"{h.name}: {err}"
        assert f"inet {h.address}/30" in out, out


def test_ssh_between_hosts_crosses_the_stage(tb: Testbed) -> None:
    src, dst = _pair_hosts(tb, "eu", "ap")
    started = time.monotonic()
    proc = tb.run(src, dst.ssh_argv(["hostname"]), timeout=30)
    assert proc.returncode == 0, proc.stderr
    # TCP handshake + kex + auth + channel: several round trips of 60 ms.
    assert time.monotonic() - started >= 3 * tb.rtt_ms("eu", "ap") / 1000


def test_wrong_host_key_is_refused(tb: Testbed) -> None:
    bad = tb.host("us-3")
    proc = subprocess.run(bad.ssh_argv(), capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 255
    assert "Host key verification failed" in proc.stderr
    scan = subprocess.run(
        ["ssh-keyscan", "-T", "5", "-t", "ed25519", bad.address],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    served = scan.stdout.split(maxsplit=1)[1].strip()
    assert served == bad.served_host_key != bad.host_key


def test_unreachable_host_times_out(tb: Testbed) -> None:
    dead = tb.host("eu-3")
    started = time.monotonic()
    proc = subprocess.run(dead.ssh_argv(connect_timeout=2), capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 255
    assert "timed out" in proc.stderr
    assert time.monotonic() - started >= 1.8
    received, _ = _ping(tb, tb.host("eu-1"), dead, count=3, interval=0.2)
    assert received == 0


def test_slow_banner_host(tb: Testbed) -> None:
    slow = tb.host("ap-3")
    started = time.monotonic()
    with socket.create_connection((slow.address, slow.port), timeout=10) as sock:
        connected = time.monotonic() - started
        banner = sock.recv(64)
        banner_after = time.monotonic() - started
    assert connected < 1.0
    assert banner.startswith(b"SSH-2.0-")
    assert banner_after >= SLOW_BANNER_S * 0.95

    impatient = subprocess.run(
        slow.ssh_argv(connect_timeout=1), capture_output=True, text=True, timeout=30, check=False
    )
    assert impatient.returncode == 255
    assert "banner exchange" in impatient.stderr

    started = time.monotonic()
    patient = subprocess.run(slow.ssh_argv(connect_timeout=10), capture_output=True, text=True, timeout=30, check=False)
    assert patient.returncode == 0, patient.stderr
    assert time.monotonic() - started >= SLOW_BANNER_S


def _root_ping_rtts(address: str, count: int = 8) -> list[float]:
    out = subprocess.run(
        ["ping", "-n", "-c", str(count), "-i", "0.05", "-W", "2", address],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    ).stdout
    return [float(m) for m in re.findall(r"time=([\d.]+) ms", out)]


def test_controller_traffic_bypasses_the_stage_by_default(tb: Testbed) -> None:
    rtts = _root_ping_rtts(tb.host("ap-1").address)
    assert len(rtts) == 8
    assert min(rtts[1:]) < 1.0, rtts


def test_benchmark_range_outside_the_testbed_never_leaves_the_machine(tb: Testbed) -> None:
    # Infrastructure /24 of the last slot: never a host, whoever owns that slot.
    outside = "198.19.255.254"
    assert ipaddress.IPv4Address(outside) not in ipaddress.IPv4Network(tb.block)
    with pytest.raises(OSError) as err:
        socket.create_connection((outside, 22), timeout=2).close()
    assert err.value.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH), err.value


def test_infrastructure_survived(tb: Testbed) -> None:
    assert tb.dead_services() == []
    stats = tb.stage_stats()["global"]
    assert stats["foreign"] == 0  # nothing outside 198.18.0.0/15 ever reached the stage


# --------------------------------------------------------------------------- teardown


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _assert_gone(prefix: str, netns: list[str], workdir: Path | None, pids: list[int]) -> None:
    assert prefix.startswith("gstb")
    assert [n for n in list_netns() if n.startswith(prefix)] == []
    assert not set(netns) & set(list_netns())
    assert root_links_with_prefix(prefix) == []
    assert int(prefix[4:6]) not in guard_route_slots()
    assert workdir is None or not workdir.exists()
    assert [p for p in pids if _alive(p)] == []
    if workdir is not None:
        # No process anywhere still refers to the testbed's files.
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                except OSError:
                    continue
                assert str(workdir).encode() not in cmdline, entry


SMALL = {"x": 1, "y": 2}
SMALL_LINKS = {("x", "y"): Link(3)}


def test_teardown_leaves_nothing() -> None:
    with Testbed(zones=SMALL, links=SMALL_LINKS, faults={"y-2": SlowBanner(0.1)}) as bed:
        x, y = bed.host("x-1"), bed.host("y-1")
        # An untracked daemon, as a probe might leave behind over ssh.
        daemon = bed.popen(y, ["setsid", "-f", "sleep", "300"], stdout=subprocess.DEVNULL)
        daemon.wait(timeout=10)
        # An open ssh session (sshd child process) at teardown time.
        session = subprocess.Popen(x.ssh_argv(["sleep", "300"]), stdin=subprocess.DEVNULL)
        time.sleep(1.0)  # real sleep: the ssh session's sshd child must exist before teardown runs
        pids = pids_in_netns(bed.netns_names)
        assert len(pids) >= 5  # stage, 3 sshd, proxy, daemon, session
        snapshot = (bed.prefix, list(bed.netns_names), bed.workdir)
    session.wait(timeout=10)
    _assert_gone(*snapshot, pids)


def test_teardown_when_the_test_body_fails() -> None:
    with pytest.raises(RuntimeError, match="boom"), Testbed(zones=SMALL, links=SMALL_LINKS) as bed:
        snapshot = (bed.prefix, list(bed.netns_names), bed.workdir)
        pids = pids_in_netns(bed.netns_names)
        raise RuntimeError("boom")
    _assert_gone(*snapshot, pids)


class _FailsAfterStage(Testbed):
    """Injects a setup failure once namespaces, links, routes and the stage exist."""

    seen_pids: list[int]

    def _start_stage(self, binary: Path) -> None:
        super()._start_stage(binary)
        self.seen_pids = pids_in_netns(self.netns_names)
        raise RuntimeError("injected setup failure")


def test_teardown_when_setup_fails_halfway() -> None:
    bed = _FailsAfterStage(zones=SMALL, links=SMALL_LINKS)
    with pytest.raises(RuntimeError, match="injected"), bed:
        pytest.fail("body must not run")
    assert bed.netns_names and bed.seen_pids and bed.root_link
    _assert_gone(bed.prefix, bed.netns_names, bed.workdir, bed.seen_pids)


def test_leftovers_of_a_killed_run_are_cleaned() -> None:
    child_code = textwrap.dedent(
        """
        import json, sys, time
        from tests.testbed import Link, Testbed
        bed = Testbed(zones={"x": 1, "y": 1}, links={("x", "y"): Link(1)})
        bed.start()
        print(json.dumps([bed.prefix, bed.netns_names, str(bed.workdir)]), flush=True)
        time.sleep(300)  # real sleep: a child process holding the testbed until the test kills it
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    child = subprocess.Popen(
        [sys.executable, "-c", child_code], stdout=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT
    )
    try:
        assert child.stdout is not None
        prefix, netns, workdir = json.loads(child.stdout.readline())
    finally:
        child.send_signal(signal.SIGKILL)  # no finally/atexit runs: a real crash
        child.wait(timeout=10)
        if child.stdout is not None:
            child.stdout.close()
    assert set(netns) <= set(list_netns()), "the crash should have left namespaces behind"
    assert Path(workdir).exists()
    assert cleanup_stale() == []
    _assert_gone(prefix, netns, Path(workdir), [])


def test_controller_zone_puts_the_test_process_in_a_zone() -> None:
    with Testbed(zones=SMALL, links=SMALL_LINKS, controller_zone="x") as bed:
        far = _root_ping_rtts(bed.host("y-1").address)[1:]
        near = _root_ping_rtts(bed.host("x-1").address)[1:]
    assert rtt_agrees(far, bed.rtt_ms("x", "y")), far
    assert rtt_agrees(near, bed.rtt_ms("x", "x")), near


# --------------------------------------------------------------------------- scale


def test_scales_to_24_hosts_in_6_zones(record_property: Callable[[str, object], None]) -> None:
    zones = {z: 4 for z in ("z0", "z1", "z2", "z3", "z4", "z5")}
    names = list(zones)
    links = {(a, b): Link(1.0 + 2 * i + 3 * j) for i, a in enumerate(names) for j, b in enumerate(names) if i < j}
    started = time.monotonic()
    with Testbed(zones=zones, links=links) as bed:
        setup_s = time.monotonic() - started
        record_property("setup_s_24_hosts", round(setup_s, 2))
        assert len(bed.hosts) == 24
        sshs = [
            subprocess.Popen(h.ssh_argv(["true"]), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for h in bed.hosts.values()
        ]
        for p in sshs:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
        pings = {}
        for a, b in links:
            src, dst = bed.zone_hosts(a)[0], bed.zone_hosts(b)[1]
            pings[(a, b)] = subprocess.Popen(
                bed.exec_argv(src, ["ping", "-n", "-c", "6", "-i", "0.05", dst.address]),
                stdout=subprocess.PIPE,
                text=True,
            )
        wrong = []
        for (a, b), p in pings.items():
            out, _ = p.communicate(timeout=30)
            rtts = [float(m) for m in re.findall(r"time=([\d.]+) ms", out)]
            assert len(rtts) == 6, out
            if not rtt_agrees(rtts[1:], bed.rtt_ms(a, b)):
                wrong.append(f"{a}->{b}: {rtts[1:]} vs {bed.rtt_ms(a, b)}")
        assert not wrong, wrong
    print(f"24-host/6-zone testbed setup took {setup_s:.2f} s")
