"""SSH faults over real loopback sockets: a host that accepts TCP and never speaks, one that sends its banner and
stalls, one that completes the handshake and authentication and then never answers a command, and a port
nobody listens on. Each is reported by its own name within the timeout the settings give, and timeouts are not
retried (they already waited as long as allowed)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import asyncssh
import pytest

from geosched.files.inventory import SshTarget
from geosched.probes.failures import FailureKind, ProbeError
from geosched.probes.hostkeys import HostKeys
from geosched.probes.settings import ProbeSettings
from geosched.probes.ssh import SshPool

HOST_KEY = asyncssh.generate_private_key("ssh-ed25519")
CLIENT_KEY = asyncssh.generate_private_key("ssh-ed25519")
SETTINGS = ProbeSettings(connect_attempts=3, connect_timeout_s=1.0)
# OpenSSH's identification line (RFC 4253 section 4.2), as a stalled sshd would send before going quiet.
BANNER = b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n"


def target(port: int, key: Path | None = None) -> SshTarget:
    return SshTarget(name="n1", address="127.0.0.1", zone="z", region="r", port=port, user="probe", key=key,
                     host_key=HOST_KEY.export_public_key().decode().strip())


@asynccontextmanager
async def raw_server(on_connect: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
                     ) -> AsyncIterator[tuple[int, list[int]]]:
    """A TCP server on loopback that runs `on_connect` per connection; yields its port and a connection count."""
    accepted: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        try:
            await on_connect(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], accepted
    finally:
        server.close()
        await server.wait_closed()


async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    # Real time on a real socket: the client's own timeouts (real, in asyncssh) are what is tested.
    await asyncio.sleep(30)  # a server that accepts and never speaks (cancelled by the test)


async def banner_then_silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(BANNER)
    await writer.drain()
    # Real time on a real socket: the client's own timeouts (real, in asyncssh) are what is tested.
    await asyncio.sleep(30)  # a server that accepts and never speaks (cancelled by the test)


async def connect_failure(port: int, tmp_path: Path) -> tuple[ProbeError, float]:
    pool = SshPool([target(port)], HostKeys(tmp_path / "known_hosts", []), SETTINGS)
    started = time.monotonic()
    try:
        with pytest.raises(ProbeError) as info:
            await pool.connect("n1")
    finally:
        await pool.close()
    return info.value, time.monotonic() - started


@pytest.mark.parametrize("behaviour", [silent, banner_then_silent], ids=["before-banner", "after-banner"])
def test_a_host_that_accepts_tcp_and_stalls_is_a_timeout_within_the_connect_timeout(
        tmp_path: Path, behaviour: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]) -> None:
    async def scenario() -> tuple[ProbeError, float, int]:
        async with raw_server(behaviour) as (port, accepted):
            error, elapsed = await connect_failure(port, tmp_path)
            return error, elapsed, len(accepted)

    error, elapsed, connections = asyncio.run(scenario())
    assert error.kind is FailureKind.TIMEOUT, error
    assert "accepted TCP but the SSH handshake did not finish within 1s" in error.reason
    # It waited for the timeout, once: a timeout is not retried.
    assert SETTINGS.connect_timeout_s * 0.9 <= elapsed < SETTINGS.connect_timeout_s * 2
    assert connections == 1


def test_connection_refused_is_unreachable_at_once(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago and that nobody listens on now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def scenario() -> tuple[ProbeError, float]:
        return await connect_failure(port, tmp_path)

    error, elapsed = asyncio.run(scenario())
    assert error.kind is FailureKind.UNREACHABLE, error
    assert error.reason == f"127.0.0.1:{port}: Connection refused"
    assert elapsed < SETTINGS.connect_timeout_s  # refused is an answer: nothing to wait for


class _Server(asyncssh.SSHServer):
    def begin_auth(self, username: str) -> bool:
        return True

    def public_key_auth_supported(self) -> bool:
        return True


def test_a_host_that_stalls_after_the_handshake_times_out_the_command_not_the_run(tmp_path: Path) -> None:
    """A real SSH server (asyncssh) that verifies our key, opens the session and never runs the command."""
    key_file = tmp_path / "id_ed25519"
    CLIENT_KEY.write_private_key(str(key_file))
    key_file.chmod(0o600)
    started_commands: list[str] = []

    async def stall(process: asyncssh.SSHServerProcess[str]) -> None:
        started_commands.append(str(process.command))
        # Real time in a real sshd (asyncssh's server): the client's command timeout is what is tested.
        await asyncio.sleep(30)  # a command that stalls until the client gives up

    async def scenario() -> tuple[ProbeError, float, float]:
        authorized = asyncssh.import_authorized_keys(CLIENT_KEY.export_public_key().decode())
        server = await asyncssh.create_server(_Server, "127.0.0.1", 0, server_host_keys=[HOST_KEY],
                                              authorized_client_keys=authorized, process_factory=stall)
        port = server.sockets[0].getsockname()[1]
        pool = SshPool([target(port, key_file)], HostKeys(tmp_path / "known_hosts", []), SETTINGS)
        try:
            before = time.monotonic()
            await pool.connect("n1")  # the handshake and authentication complete
            connect_s = time.monotonic() - before
            started = time.monotonic()
            with pytest.raises(ProbeError) as info:
                await pool.run("n1", ["ping", "-c", "1", "127.0.0.1"], timeout=1.0)
            return info.value, time.monotonic() - started, connect_s
        finally:
            await pool.close()
            server.close()
            await server.wait_closed()

    error, elapsed, connect_s = asyncio.run(scenario())
    assert error.kind is FailureKind.TIMEOUT, error
    assert error.reason == "ping on n1 did not finish within 1s"
    assert started_commands == ["ping -c 1 127.0.0.1"]
    assert 0.9 <= elapsed < 2.0 + connect_s
