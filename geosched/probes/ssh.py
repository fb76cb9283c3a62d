"""SSH to the nodes: one verified connection per node per run, shared by every command sent to it.

* Host keys are always verified (see hostkeys.py); trust on first use only when the settings allow it,
  and then the key is pinned before anything else is sent.
* Authentication is by key only: the inventory's `key`, else the agent and default keys. Password,
  keyboard-interactive, GSS and host-based auth are off.
* `proxy_jump` nodes are reached through their jump host's connection (asyncssh `tunnel=`); an inventory
  jump host is the same pooled connection the jump host's own probes use.
* Transient failures (resets, lost connections, sshd's MaxStartups throttling) are retried with
  backoff; authentication and host-key failures never are, and neither are timeouts, which already
  waited for as long as the settings allow.
* Commands are argv lists, quoted with shlex (commands.py); never a string built from node data.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import asyncssh

from geosched.core.errors import InputError
from geosched.core.retry import RetryPolicy, aretry
from geosched.files.gate import Kind, check_file
from geosched.files.inventory import SshTarget
from geosched.files.jumpspec import JumpSpecError, parse_jump
from geosched.probes.commands import to_command_line
from geosched.probes.failures import FailureKind, HostKeyUnknown, ProbeError
from geosched.probes.hostkeys import HostKeys, Trust
from geosched.probes.settings import ProbeSettings

_TRANSIENT_DISCONNECTS = {
    asyncssh.DISC_CONNECTION_LOST,
    asyncssh.DISC_TOO_MANY_CONNECTIONS,
    asyncssh.DISC_SERVICE_NOT_AVAILABLE,
}


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_status: int | None
    stdout: str
    stderr: str


class RemoteProcess(Protocol):
    async def readline(self, timeout: float) -> str: ...
    async def finish(self, timeout: float) -> CommandResult: ...
    @property
    def running(self) -> bool: ...


class Remote(Protocol):
    """What probes need from the nodes; the SSH pool in production, a fake in unit tests."""

    async def run(self, node: str, argv: Sequence[str], timeout: float) -> CommandResult: ...
    def start(self, node: str, argv: Sequence[str]) -> contextlib.AbstractAsyncContextManager[RemoteProcess]: ...


def is_transient(exc: BaseException) -> bool:
    """Worth another attempt: the server or the path hiccuped, not a verdict on who we are or who it is."""
    if isinstance(exc, asyncssh.HostKeyNotVerifiable | asyncssh.PermissionDenied | ProbeError):
        return False
    if isinstance(exc, asyncssh.DisconnectError):
        return exc.code in _TRANSIENT_DISCONNECTS
    if isinstance(exc, asyncssh.ChannelOpenError):
        return exc.code == asyncssh.OPEN_RESOURCE_SHORTAGE
    return isinstance(exc, ConnectionResetError | ConnectionAbortedError | BrokenPipeError)


def classify(exc: BaseException, target: SshTarget, trust: Trust, settings: ProbeSettings) -> ProbeError:
    """An exception from connecting -> a named failure with a short reason (no key material)."""
    where = f"{target.address}:{target.port}"
    if isinstance(exc, ProbeError):
        return exc
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return ProbeError(FailureKind.HOST_KEY_MISMATCH,
                          f"{where} presented a host key that does not match the one from {trust.source}; "
                          "refused before authentication")
    if isinstance(exc, asyncssh.PermissionDenied):
        return ProbeError(FailureKind.AUTH, f"{where} refused the key of user {target.user!r}")
    if isinstance(exc, asyncssh.ChannelOpenError):
        return ProbeError(FailureKind.UNREACHABLE, f"jump host could not open a connection to {where}: {exc.reason}")
    if isinstance(exc, asyncssh.DisconnectError):
        if exc.code == asyncssh.DISC_KEY_EXCHANGE_FAILED and "host key" in exc.reason.lower():
            return ProbeError(FailureKind.HOST_KEY_MISMATCH, f"{where} offers no host key of the known type")
        return ProbeError(FailureKind.CONNECTION_LOST, f"{where} closed the connection: {exc.reason}")
    if isinstance(exc, TimeoutError):
        return ProbeError(FailureKind.TIMEOUT, f"{where} accepted TCP but the SSH handshake did not finish within "
                          f"{settings.connect_timeout_s:g}s (slow or overloaded sshd)")
    if isinstance(exc, OSError):
        return ProbeError(FailureKind.UNREACHABLE, f"{where}: {exc.strerror or type(exc).__name__}")
    return ProbeError(FailureKind.CONNECTION_LOST, f"{where}: {type(exc).__name__}")


def check_key_file(target: SshTarget) -> None:
    """The inventory's private key must be a readable file before anything is dialled: asyncssh would raise a
    plain OSError, which reads as an unreachable node."""
    if target.key is None:
        return
    if not target.key.is_file():
        problem = "does not exist" if not target.key.exists() else "is not a regular file"
        raise ProbeError(FailureKind.KEY, f"private key {target.key} for {target.name} {problem}")
    if not os.access(target.key, os.R_OK):
        raise ProbeError(FailureKind.KEY, f"private key {target.key} for {target.name} is not readable")
    # asyncssh reads the key, and its `.pub` and `-cert.pub` beside it when there, whole: a 2 GiB sparse key
    # took 2 GB before a MemoryError. Each is checked through the gate first (a regular file, at most 1 MiB).
    for path in (target.key, Path(f"{target.key}.pub"), Path(f"{target.key}-cert.pub")):
        if path is target.key or os.path.lexists(path):
            try:
                check_file(path, Kind.CREDENTIAL)
            except InputError as exc:
                raise ProbeError(FailureKind.KEY, f"private key {target.key} for {target.name}: {exc}") from None


async def tcp_connect(address: str, port: int, timeout: float) -> socket.socket:
    """A connected socket, or an UNREACHABLE error: kept apart from the SSH handshake so that "nothing
    answers" and "sshd answers too slowly" are reported as the different problems they are."""
    loop = asyncio.get_running_loop()
    where = f"{address}:{port}"
    try:
        infos = await asyncio.wait_for(loop.getaddrinfo(address, port, type=socket.SOCK_STREAM), timeout)
    except (OSError, TimeoutError) as exc:
        raise ProbeError(FailureKind.UNREACHABLE, f"cannot resolve {address}: {type(exc).__name__}") from None
    reason = "no address"
    for family, kind, proto, _, sockaddr in infos:
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            await asyncio.wait_for(loop.sock_connect(sock, sockaddr), timeout)
            return sock
        except TimeoutError:
            reason = f"no TCP answer within {timeout:g}s"
        except OSError as exc:
            # By errno: asyncio words a refusal "Connect call failed (addr)", which does not say it was refused.
            reason = os.strerror(exc.errno) if exc.errno else exc.strerror or type(exc).__name__
        except BaseException:
            sock.close()
            raise
        sock.close()
    raise ProbeError(FailureKind.UNREACHABLE, f"{where}: {reason}")


class _Process:
    def __init__(self, proc: asyncssh.SSHClientProcess[str]) -> None:
        self._proc = proc

    async def readline(self, timeout: float) -> str:
        return await asyncio.wait_for(self._proc.stdout.readline(), timeout)

    async def finish(self, timeout: float) -> CommandResult:
        done = await self._proc.wait(check=False, timeout=timeout)
        return CommandResult(done.exit_status, _text(done.stdout), _text(done.stderr))

    @property
    def running(self) -> bool:
        return self._proc.exit_status is None and self._proc.exit_signal is None and not self._proc.is_closing()

    def close(self) -> None:
        self._proc.close()


class SshPool:
    """Connections by node name, opened on first use, at most once per run; an implementation of Remote."""

    def __init__(self, targets: Sequence[SshTarget], hostkeys: HostKeys, settings: ProbeSettings) -> None:
        self.targets = {t.name: t for t in targets}
        self.hostkeys = hostkeys
        self.settings = settings
        self.opened: Counter[str] = Counter()
        self._tasks: dict[str, asyncio.Task[asyncssh.SSHClientConnection]] = {}
        self._order: list[asyncssh.SSHClientConnection] = []
        self._connect_slots = asyncio.Semaphore(settings.concurrency)
        # Transient connect errors (resets, MaxStartups throttling) on the one retry policy: up to 0.2, 0.4, ...
        # 2 s between attempts, jittered so nodes throttled together do not come back together.
        self._connect_retry = RetryPolicy(attempts=settings.connect_attempts, initial_s=0.2, max_s=2.0)
        self._sessions: dict[str, asyncio.Semaphore] = {}

    async def __aenter__(self) -> SshPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self, name: str) -> asyncssh.SSHClientConnection:
        """The node's connection; concurrent callers share one attempt and its outcome."""
        task = self._tasks.get(name)
        if task is None:
            task = asyncio.create_task(self._open(self._target(name)), name=f"ssh-connect:{name}")
            self._tasks[name] = task
        # Shielded: one caller giving up (its own deadline) must not cancel the attempt for the others.
        return await asyncio.shield(task)

    async def run(self, node: str, argv: Sequence[str], timeout: float) -> CommandResult:
        conn = await self.connect(node)
        async with self._session_slot(node):
            try:
                done = await conn.run(to_command_line(argv), check=False, timeout=timeout)
            except asyncssh.TimeoutError:
                raise ProbeError(FailureKind.TIMEOUT, f"{argv[0]} on {node} did not finish within {timeout:g}s"
                                 ) from None
            except (asyncssh.Error, OSError) as exc:
                raise _session_error(node, argv[0], exc) from None
        return CommandResult(done.exit_status, _text(done.stdout), _text(done.stderr))

    @contextlib.asynccontextmanager
    async def start(self, node: str, argv: Sequence[str]) -> AsyncIterator[RemoteProcess]:
        conn = await self.connect(node)
        async with self._session_slot(node):
            try:
                proc = await conn.create_process(to_command_line(argv))
            except (asyncssh.Error, OSError) as exc:
                raise _session_error(node, argv[0], exc) from None
            wrapped = _Process(proc)
            try:
                yield wrapped
            finally:
                wrapped.close()

    async def close(self) -> None:
        for task in self._tasks.values():
            if not task.done():
                task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        # Tunnelled connections first, their jump hosts after.
        for conn in reversed(self._order):
            conn.close()
        for conn in reversed(self._order):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), 2.0)

    # --- connecting -----------------------------------------------------------------------------------

    def _target(self, name: str) -> SshTarget:
        target = self.targets.get(name)
        if target is None:
            raise ProbeError(FailureKind.PROBE, f"{name!r} is not in the inventory")
        return target

    def _session_slot(self, node: str) -> asyncio.Semaphore:
        return self._sessions.setdefault(node, asyncio.Semaphore(self.settings.sessions_per_node))

    async def _open(self, target: SshTarget) -> asyncssh.SSHClientConnection:
        tunnel = None
        if target.proxy_jump:
            if target.proxy_jump not in self.targets:
                # A jump host outside the inventory (geosched.files.jumpspec): reached with this node's key.
                self.targets[target.proxy_jump] = _jump_target(target.proxy_jump, target)
            try:
                tunnel = await self.connect(target.proxy_jump)
            except ProbeError as exc:
                raise ProbeError(FailureKind.JUMP, f"jump host {target.proxy_jump}: {exc.kind.value}: {exc.reason}"
                                 ) from None
        trust = self.hostkeys.trust(target)
        if not trust.known and not self.settings.trust_on_first_use:
            raise HostKeyUnknown(f"no host key for {target.address}:{target.port} in the inventory or known_hosts "
                                 "files; pin `host_key` or run once with --trust-on-first-use")
        async with self._connect_slots:
            try:
                conn = await aretry(lambda: self._dial(target, trust, tunnel), self._connect_retry, is_transient)
            except Exception as exc:
                raise classify(exc, target, trust, self.settings) from None
        self._order.append(conn)
        self.opened[target.name] += 1
        if not trust.known:
            key = conn.get_server_host_key()
            if key is None:
                conn.close()
                raise ProbeError(FailureKind.HOST_KEY_UNKNOWN, f"{target.address} presented no host key to pin")
            self.hostkeys.pin(target, key)
        return conn

    async def _dial(self, target: SshTarget, trust: Trust,
                    tunnel: asyncssh.SSHClientConnection | None) -> asyncssh.SSHClientConnection:
        """One connection attempt (the seam unit tests replace)."""
        check_key_file(target)
        sock = None
        if tunnel is None:
            sock = await tcp_connect(target.address, target.port, self.settings.connect_timeout_s)
        keys: dict[str, object] = {}
        if target.key is not None:
            # Only the configured key: offering every agent key would leak which keys we hold.
            keys = {"client_keys": [str(target.key)], "agent_path": None}
        try:
            return await asyncssh.connect(
                target.address, target.port, tunnel=tunnel if tunnel is not None else (), sock=sock,
                config=None, username=target.user,
                known_hosts=trust.as_known_hosts() if trust.known else None,
                connect_timeout=self.settings.connect_timeout_s,
                password_auth=False, kbdint_auth=False, gss_auth=False, gss_kex=False, host_based_auth=False,
                keepalive_interval=15.0, errors="replace",
                **keys,
            )
        except BaseException:
            if sock is not None:
                sock.close()
            raise


def _session_error(node: str, program: str, exc: BaseException) -> ProbeError:
    if isinstance(exc, asyncssh.ChannelOpenError):
        return ProbeError(FailureKind.PROBE, f"{node} refused a session for {program}: {exc.reason}")
    if isinstance(exc, asyncssh.DisconnectError | OSError):
        return ProbeError(FailureKind.CONNECTION_LOST, f"{node}: connection lost running {program}")
    return ProbeError(FailureKind.PROBE, f"{node}: {type(exc).__name__} running {program}")


def _jump_target(spec: str, via: SshTarget) -> SshTarget:
    """A jump host outside the inventory -> a target; its host key must come from known_hosts (or first use).
    Read by the parser the inventory was checked with, so the pool dials what the load accepted."""
    try:
        jump = parse_jump(spec)
    except JumpSpecError as exc:
        raise ProbeError(FailureKind.JUMP, f"cannot parse jump host: {exc}") from None
    return SshTarget(name=spec, address=jump.host, zone="", region="", port=jump.port, user=jump.user or via.user,
                     key=via.key)


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
