"""The probe kinds: an echo run (RTT, jitter, loss) and a throughput test, each over a `Remote`.

* echo: `ping` on the source against the destination's address. With `RttMethod.AUTO`, when ping cannot
  run or nothing comes back (ICMP filtered), timed TCP connects to the destination's sshd port stand in:
  a connect is one SYN/SYN-ACK round trip, and that port is known to be open.
* throughput: a one-off iperf3 server on the destination (on the first free port from
  `settings.iperf_port`), the client on the source with -J. The server is stopped whatever happens to
  the client, and its lifetime is bounded on the node itself in case we cannot reach it any more.
"""

from __future__ import annotations

import asyncio
import contextlib

from geosched.files.inventory import SshTarget
from geosched.probes import commands
from geosched.probes.failures import FailureKind, ProbeError
from geosched.probes.parsers import (
    EchoRun,
    IperfRun,
    OutputError,
    PingUnavailable,
    parse_iperf3,
    parse_pid,
    parse_ping,
    parse_tcp_rtt,
)
from geosched.probes.settings import ProbeSettings, RttMethod
from geosched.probes.ssh import Remote, RemoteProcess

# Older iputils refuse intervals under 200 ms to non-root users.
USER_MIN_INTERVAL_S = 0.2
# Extra time a command gets beyond what its own arguments bound it to (SSH channel setup, process start).
COMMAND_SLACK_S = 5.0


async def measure_echo(remote: Remote, src: SshTarget, dst: SshTarget, settings: ProbeSettings) -> EchoRun:
    icmp: EchoRun | None = None
    if settings.rtt_method is not RttMethod.TCP:
        try:
            icmp = await _ping(remote, src, dst, settings)
        except PingUnavailable as exc:
            if settings.rtt_method is RttMethod.ICMP:
                raise ProbeError(FailureKind.PROBE, f"ping on {src.name}: {exc}") from None
        if icmp is not None and (icmp.received > 0 or settings.rtt_method is RttMethod.ICMP):
            return icmp
    tcp = await _tcp(remote, src, dst, settings)
    # Neither answered: the ping run (all lost) is the measurement; TCP only stands in for filtered ICMP.
    return icmp if icmp is not None and tcp.received == 0 else tcp


async def _ping(remote: Remote, src: SshTarget, dst: SshTarget, settings: ProbeSettings) -> EchoRun:
    interval = settings.ping_interval_s
    for _ in range(2):
        argv = commands.ping(dst.peer, settings.ping_count, interval, settings.ping_reply_timeout_s)
        # ping ends itself by its -w deadline; the command timeout only catches a stuck channel.
        budget = settings.ping_count * interval + settings.ping_reply_timeout_s + 1
        done = await remote.run(src.name, argv, budget + COMMAND_SLACK_S)
        try:
            return parse_ping(done.stdout, done.stderr, done.exit_status)
        except PingUnavailable as exc:
            if "interval" not in str(exc) or interval >= USER_MIN_INTERVAL_S:
                raise
            interval = USER_MIN_INTERVAL_S
        except OutputError as exc:
            raise ProbeError(FailureKind.PROBE, f"ping on {src.name}: {exc}") from None
    raise ProbeError(FailureKind.PROBE, f"ping on {src.name} refused every interval")


async def _tcp(remote: Remote, src: SshTarget, dst: SshTarget, settings: ProbeSettings) -> EchoRun:
    argv = commands.tcp_rtt(dst.peer, dst.port, settings.ping_count, settings.ping_interval_s,
                            settings.ping_reply_timeout_s)
    budget = settings.ping_count * (settings.ping_interval_s + settings.ping_reply_timeout_s)
    done = await remote.run(src.name, argv, budget + COMMAND_SLACK_S)
    try:
        return parse_tcp_rtt(done.stdout, done.stderr, done.exit_status)
    except OutputError as exc:
        raise ProbeError(FailureKind.PROBE, f"TCP RTT on {src.name}: {exc}") from None


async def measure_throughput(remote: Remote, src: SshTarget, dst: SshTarget, settings: ProbeSettings,
                             port_offset: int = 0) -> IperfRun:
    lifetime = int(settings.throughput_budget_s + 2 * COMMAND_SLACK_S)
    for attempt in range(settings.iperf_port_tries):
        port = settings.iperf_port + (port_offset + attempt) % settings.iperf_port_tries
        async with remote.start(dst.name, commands.iperf_server(port, lifetime)) as server:
            pid = await _server_pid(server, dst, settings)
            tested = False
            try:
                if not await _listening(server, settings):
                    ended = await server.finish(COMMAND_SLACK_S)
                    if "in use" in ended.stdout + ended.stderr:
                        continue
                    raise ProbeError(FailureKind.PROBE, f"iperf3 server on {dst.name} did not start "
                                     f"(exit {ended.exit_status})")
                result = await _client(remote, src, dst, port, settings)
                tested = True
                return result
            finally:
                # Shielded: the run's deadline may be cancelling us, and the server must still be stopped.
                await asyncio.shield(_stop(remote, dst, server, pid, tested))
    raise ProbeError(FailureKind.PROBE, f"no free port for iperf3 on {dst.name} from {settings.iperf_port}")


async def _server_pid(server: RemoteProcess, dst: SshTarget, settings: ProbeSettings) -> int:
    try:
        return parse_pid(await server.readline(settings.command_timeout_s))
    except (OutputError, TimeoutError) as exc:
        raise ProbeError(FailureKind.PROBE, f"iperf3 server on {dst.name}: {exc or 'no pid'}") from None


async def _listening(server: RemoteProcess, settings: ProbeSettings) -> bool:
    while True:
        try:
            line = await server.readline(settings.command_timeout_s)
        except TimeoutError:
            raise ProbeError(FailureKind.TIMEOUT, f"iperf3 server not listening after {settings.command_timeout_s:g}s"
                             ) from None
        if not line:
            return False
        if "Server listening" in line:
            return True


async def _client(remote: Remote, src: SshTarget, dst: SshTarget, port: int, settings: ProbeSettings) -> IperfRun:
    argv = commands.iperf_client(dst.peer, port, settings.throughput_seconds, settings.throughput_omit_s,
                                 settings.connect_timeout_s)
    done = await remote.run(src.name, argv, settings.throughput_budget_s + COMMAND_SLACK_S)
    try:
        result = parse_iperf3(done.stdout)
    except OutputError as exc:
        raise ProbeError(FailureKind.PROBE, f"iperf3 {src.name} -> {dst.name}: {exc}") from None
    if result.received_bps <= 0:
        raise ProbeError(FailureKind.PROBE, f"iperf3 {src.name} -> {dst.name}: nothing received")
    return result


async def _stop(remote: Remote, dst: SshTarget, server: RemoteProcess, pid: int, tested: bool) -> None:
    """After a test the one-off server exits by itself (give it a moment); otherwise kill it now.
    The pid is still the server's: its channel is open, so the process has not exited."""
    if not server.running:
        return
    if tested:
        with contextlib.suppress(Exception):
            await server.finish(2.0)
            return
    with contextlib.suppress(Exception):
        await remote.run(dst.name, commands.kill(pid), COMMAND_SLACK_S)
