"""Probe kinds and the run engine over a scripted fake Remote: no SSH, no network, fast.

Covers what the testbed cannot provoke on demand: ICMP unavailable or filtered, iperf3 ports in use,
client failures and cancellation with the server still up, and the scheduling rules of throughput tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest

from geosched.files.inventory import SshTarget
from geosched.probes.engine import PlanOptions, run_probes
from geosched.probes.failures import FailureKind, ProbeError
from geosched.probes.kinds import measure_echo, measure_throughput
from geosched.probes.locks import ResourceLocks
from geosched.probes.settings import Kind, PlanKind, ProbeSettings, RttMethod
from geosched.probes.ssh import CommandResult, RemoteProcess

DATA = Path(__file__).parent / "data"
PING_OK = (DATA / "ping_intra_zone.txt").read_text()
PING_LOST = (DATA / "ping_all_lost.txt").read_text()
TCP_OK = (DATA / "tcp_rtt_loss.txt").read_text()
IPERF_OK = (DATA / "iperf3_client.json").read_text()
IPERF_REFUSED = (DATA / "iperf3_refused.json").read_text()

Handler = Callable[[str, list[str]], CommandResult]


def target(name: str, zone: str = "z") -> SshTarget:
    return SshTarget(name=name, address=f"10.0.0.{abs(hash(name)) % 250 + 1}", zone=zone, region="r")


class FakeServer:
    """An iperf3 server as the fake sees it: prints its pid and 'Server listening', then waits to be
    finished by its test (`done`) or killed."""

    def __init__(self, fake: FakeRemote, node: str, port: int, busy_port: bool) -> None:
        self.fake, self.node, self.port = fake, node, port
        self.lines = ["4242\n"] + ([] if busy_port else ["-----\n", f"Server listening on {port} (test #1)\n"])
        self.exited = asyncio.Event()
        self.busy_port = busy_port
        if busy_port:
            self.exited.set()

    async def readline(self, timeout: float) -> str:
        if self.lines:
            return self.lines.pop(0)
        await asyncio.wait_for(self.exited.wait(), timeout)
        return ""

    async def finish(self, timeout: float) -> CommandResult:
        await asyncio.wait_for(self.exited.wait(), timeout)
        err = "iperf3: error - unable to start listener for connections: Address already in use" \
            if self.busy_port else ""
        return CommandResult(1 if self.busy_port else 0, "", err)

    @property
    def running(self) -> bool:
        return not self.exited.is_set()


class FakeRemote:
    def __init__(self, handlers: dict[str, Handler] | None = None, *, busy_ports: Sequence[int] = (),
                 client_delay: float = 0.0, unreachable: Sequence[str] = ()) -> None:
        self.handlers = handlers or {}
        self.calls: list[tuple[str, list[str]]] = []
        self.busy_ports = set(busy_ports)
        self.client_delay = client_delay
        self.servers: list[FakeServer] = []
        self.killed: list[tuple[str, int]] = []
        self.active: Counter[str] = Counter()
        self.max_active: Counter[str] = Counter()
        self.unreachable = set(unreachable)
        self.opened: Counter[str] = Counter()

    async def connect(self, name: str) -> object:
        if name in self.unreachable:
            raise ProbeError(FailureKind.UNREACHABLE, f"{name}: no TCP answer")
        self.opened[name] = 1
        return object()

    def _enter(self, node: str) -> None:
        self.active[node] += 1
        self.max_active[node] = max(self.max_active[node], self.active[node])

    async def run(self, node: str, argv: Sequence[str], timeout: float) -> CommandResult:
        args = list(argv)
        self.calls.append((node, args))
        if args[0] == "kill":
            self.killed.append((node, int(args[-1])))
            for server in self.servers:
                if server.running:
                    server.exited.set()
            return CommandResult(0, "", "")
        if args[0] == "iperf3":
            self._enter(node)
            try:
                # Event-loop time: the engine schedules on the loop's clock (no clock to fake), and only a test
                # that takes a while shows whether two of them ever overlap on a node.
                await asyncio.sleep(self.client_delay)  # a throughput test that lasts client_delay
            finally:
                self.active[node] -= 1
            port = int(args[args.index("-p") + 1])
            for server in self.servers:
                if server.port == port and server.running and not server.busy_port:
                    server.exited.set()
        handler = self.handlers.get(args[0])
        if handler is None:
            raise AssertionError(f"unexpected command {args[0]}")
        return handler(node, args)

    @contextlib.asynccontextmanager
    async def start(self, node: str, argv: Sequence[str]) -> AsyncIterator[RemoteProcess]:
        args = list(argv)
        self.calls.append((node, args))
        port = int(args[-1])
        server = FakeServer(self, node, port, port in self.busy_ports)
        self.servers.append(server)
        self._enter(node)
        try:
            yield server
        finally:
            self.active[node] -= 1


def ok(stdout: str, status: int = 0) -> Handler:
    return lambda node, argv: CommandResult(status, stdout, "")


SETTINGS = ProbeSettings(ping_count=5, ping_interval_s=0.01, command_timeout_s=1.0, throughput_seconds=1,
                         throughput_omit_s=0, connect_timeout_s=1.0)


# --- echo ---------------------------------------------------------------------------------------------

def test_echo_uses_ping_when_it_answers() -> None:
    fake = FakeRemote({"ping": ok(PING_OK)})
    result = asyncio.run(measure_echo(fake, target("a"), target("b"), SETTINGS))
    assert result.method == "icmp" and result.received == 20
    assert [c[1][0] for c in fake.calls] == ["ping"]


def test_echo_falls_back_to_tcp_when_icmp_is_filtered() -> None:
    fake = FakeRemote({"ping": ok(PING_LOST, 1), "python3": ok(TCP_OK)})
    src, dst = target("a"), target("b")
    result = asyncio.run(measure_echo(fake, src, dst, SETTINGS))
    assert result.method == "tcp" and result.received == 9
    tcp_argv = fake.calls[-1][1]
    assert tcp_argv[3:5] == [dst.address, "22"]  # the address and port travel as their own arguments


def test_echo_falls_back_when_ping_cannot_run_and_keeps_all_lost_when_tcp_fails_too() -> None:
    denied = FakeRemote({"ping": lambda n, a: CommandResult(2, "", "ping: socket: Operation not permitted"),
                         "python3": ok(TCP_OK)})
    assert asyncio.run(measure_echo(denied, target("a"), target("b"), SETTINGS)).method == "tcp"
    silent = FakeRemote({"ping": ok(PING_LOST, 1), "python3": ok("-\n-\n-\n")})
    both = asyncio.run(measure_echo(silent, target("a"), target("b"), SETTINGS))
    assert (both.method, both.loss) == ("icmp", 1.0)
    strict = FakeRemote({"ping": lambda n, a: CommandResult(2, "", "ping: socket: Operation not permitted")})
    with pytest.raises(ProbeError, match="ICMP not permitted"):
        asyncio.run(measure_echo(strict, target("a"), target("b"),
                                 ProbeSettings(rtt_method=RttMethod.ICMP, ping_count=5)))


def test_echo_retries_with_the_user_minimum_interval() -> None:
    answers = iter([CommandResult(2, "", "ping: cannot flood; minimal interval allowed for user is 200ms"),
                    CommandResult(0, PING_OK, "")])
    fake = FakeRemote({"ping": lambda n, a: next(answers)})
    assert asyncio.run(measure_echo(fake, target("a"), target("b"), SETTINGS)).received == 20
    assert [c[1][c[1].index("-i") + 1] for c in fake.calls] == ["0.01", "0.2"]


# --- throughput -------------------------------------------------------------------------------------

def test_throughput_server_on_destination_client_on_source() -> None:
    fake = FakeRemote({"iperf3": ok(IPERF_OK)})
    src, dst = target("a"), target("b")
    result = asyncio.run(measure_throughput(fake, src, dst, SETTINGS))
    assert result.gbps == pytest.approx(0.01768, rel=1e-3)
    (server_node, server_argv), (client_node, client_argv) = fake.calls[:2]
    assert server_node == "b" and server_argv[:2] == ["sh", "-c"] and server_argv[-1] == "5201"
    assert client_node == "a" and client_argv[:3] == ["iperf3", "-c", dst.address] and "-J" in client_argv
    assert fake.killed == []  # the one-off server ended with its test


def test_throughput_skips_a_busy_port() -> None:
    fake = FakeRemote({"iperf3": ok(IPERF_OK)}, busy_ports=[5201, 5202])
    asyncio.run(measure_throughput(fake, target("a"), target("b"), SETTINGS))
    assert [int(s.port) for s in fake.servers] == [5201, 5202, 5203]


def test_server_is_stopped_when_the_client_fails() -> None:
    fake = FakeRemote({"iperf3": lambda n, a: CommandResult(1, IPERF_REFUSED, "")})
    # The fake client "fails" without reaching the server, so the server would wait forever.
    fake.client_delay = 0.0
    original = fake.run

    async def failing_client(node: str, argv: Sequence[str], timeout: float) -> CommandResult:
        if argv[0] == "iperf3":
            fake.calls.append((node, list(argv)))
            return CommandResult(1, IPERF_REFUSED, "")
        return await original(node, argv, timeout)

    fake.run = failing_client  # type: ignore[method-assign]
    with pytest.raises(ProbeError, match="Connection refused"):
        asyncio.run(measure_throughput(fake, target("a"), target("b"), SETTINGS))
    assert fake.killed == [("b", 4242)]
    assert not fake.servers[0].running


def test_server_is_stopped_when_the_run_is_cancelled() -> None:
    fake = FakeRemote({"iperf3": ok(IPERF_OK)}, client_delay=30.0)

    async def cancel_midway() -> None:
        task = asyncio.create_task(measure_throughput(fake, target("a"), target("b"), SETTINGS))
        for _ in range(10_000):  # until the client runs (the fake is in-loop: each yield moves it on), no timed pause
            if fake.active["a"]:
                break
            await asyncio.sleep(0)
        assert fake.active["a"], "the throughput client never started"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    started = time.monotonic()
    asyncio.run(cancel_midway())
    assert time.monotonic() - started < 5
    assert fake.killed == [("b", 4242)]


# --- engine -----------------------------------------------------------------------------------------

TARGETS = [target(f"{z}{i}", z) for z in "abc" for i in range(1, 4)]


def test_no_node_runs_two_throughput_tests_and_no_link_carries_two() -> None:
    fake = FakeRemote({"ping": ok(PING_OK), "iperf3": ok(IPERF_OK)}, client_delay=0.05)
    report = asyncio.run(run_probes(fake, TARGETS, SETTINGS, PlanOptions(kind=PlanKind.FULL,
                                                                         throughput_per_zone_pair=2)))
    assert len(report.throughputs) == 12 and not report.failures  # 6 zone pairs x 2
    assert max(fake.max_active.values()) == 1
    assert report.connections == dict.fromkeys((t.name for t in TARGETS), 1)
    assert list(report.phase_s) == ["connect", "echo", "throughput"]


def test_locks_take_all_or_nothing() -> None:
    async def scenario() -> list[str]:
        locks, log = ResourceLocks(), []

        async def hold(name: str, resources: set[str], delay: float) -> None:
            async with locks.hold(resources):
                log.append(f"+{name}")
                # Event-loop time: the locks are what is tested; holders must stay a while for overlaps to show.
                await asyncio.sleep(delay)  # hold the locks a while, so overlaps show
                log.append(f"-{name}")

        await asyncio.gather(hold("ab", {"a", "b"}, 0.05), hold("bc", {"b", "c"}, 0.01), hold("d", {"d"}, 0.01))
        assert locks.busy == frozenset()
        return log

    log = asyncio.run(scenario())
    assert log.index("-ab") < log.index("+bc")
    assert log.index("+d") < log.index("-ab")


def test_failed_nodes_are_reported_and_left_out_of_the_plan() -> None:
    fake = FakeRemote({"ping": ok(PING_OK)}, unreachable=["b2"])
    settings = ProbeSettings(kinds=frozenset({Kind.RTT, Kind.LOSS}), ping_count=5)
    report = asyncio.run(run_probes(fake, TARGETS, settings, PlanOptions(kind=PlanKind.FULL)))
    assert [(f.subject, f.kind) for f in report.failures] == [("b2", FailureKind.UNREACHABLE)]
    assert "b2" not in report.plan.nodes and len(report.echoes) == 28
    assert report.plan.throughput_pairs == ()


def test_deadline_ends_the_run_and_names_what_was_cut() -> None:
    async def slow_ping(node: str, argv: Sequence[str], timeout: float) -> CommandResult:
        # The run's deadline is on the event loop's clock (geosched/probes/engine.py), which takes no fake.
        await asyncio.sleep(60)  # a ping that outlives the run's deadline
        return CommandResult(0, PING_OK, "")

    fake = FakeRemote()
    fake.run = slow_ping  # type: ignore[method-assign]
    settings = ProbeSettings(kinds=frozenset({Kind.RTT}), deadline_s=1.5, cleanup_s=0.5)
    started = time.monotonic()
    report = asyncio.run(run_probes(fake, TARGETS[:3], settings, PlanOptions(kind=PlanKind.FULL)))
    assert time.monotonic() - started < 2.5
    assert {f.kind for f in report.failures} == {FailureKind.DEADLINE}
    assert len(report.failures) == 3 and report.echoes == ()
    assert json.dumps([f.reason for f in report.failures])
