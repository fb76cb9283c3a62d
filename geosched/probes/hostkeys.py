"""Which host keys a node may present, and pinning new ones when trust on first use is allowed.

Order of authority: the inventory's `host_key` (pinned; nothing overrides it), then geosched's own
known_hosts file (`<home>/known_hosts`, keys pinned on first use), then the user's known_hosts files.
A key written on first use is never replaced later: a changed key is a mismatch, not a new first use.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from geosched.core.errors import InputError
from geosched.files.gate import Kind, read_text
from geosched.files.inventory import SshTarget
from geosched.files.writes import PRIVATE, write_file
from geosched.probes.failures import HostKeyUnknown

KNOWN_HOSTS_NAME = "known_hosts"


@dataclass(frozen=True, slots=True)
class Trust:
    """What asyncssh's `known_hosts=` takes: trusted host keys, trusted CA keys, revoked keys."""

    host_keys: tuple[asyncssh.SSHKey, ...] = ()
    ca_keys: tuple[asyncssh.SSHKey, ...] = ()
    revoked: tuple[asyncssh.SSHKey, ...] = ()
    source: str = ""

    @property
    def known(self) -> bool:
        return bool(self.host_keys or self.ca_keys)

    def as_known_hosts(self) -> tuple[list[asyncssh.SSHKey], list[asyncssh.SSHKey], list[asyncssh.SSHKey]]:
        return list(self.host_keys), list(self.ca_keys), list(self.revoked)


def host_pattern(address: str, port: int) -> str:
    return address if port == 22 else f"[{address}]:{port}"


def known_hosts_line(address: str, port: int, key: asyncssh.SSHKey) -> str:
    algorithm, blob = key.export_public_key("openssh").decode("ascii").split()[:2]
    return f"{host_pattern(address, port)} {algorithm} {blob}"


class HostKeys:
    def __init__(self, pinned_file: Path, user_files: Sequence[Path] = ()) -> None:
        self.pinned_file = pinned_file
        self.user_files = tuple(user_files)
        # Parsed once per run, not once per node: a fleet's known_hosts can have thousands of lines.
        self._parsed: dict[Path, tuple[float, asyncssh.SSHKnownHosts]] = {}

    def trust(self, target: SshTarget) -> Trust:
        if target.host_key:
            try:
                key = asyncssh.import_public_key(target.host_key)
            except (asyncssh.KeyImportError, ValueError):
                raise HostKeyUnknown(f"the inventory's host_key for {target.name} is not a valid public key"
                                     ) from None
            return Trust(host_keys=(key,), source="inventory host_key")
        for path in (self.pinned_file, *self.user_files):
            known = self._read(path)
            if known is None:
                continue
            port = None if target.port == 22 else target.port
            keys, cas, revoked, *_ = known.match(target.address, target.address, port)
            if keys or cas:
                return Trust(tuple(keys), tuple(cas), tuple(revoked), source=str(path))
        return Trust()

    def _read(self, path: Path) -> asyncssh.SSHKnownHosts | None:
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return None
        cached = self._parsed.get(path)
        if cached is None or cached[0] != mtime:
            try:
                cached = (mtime, parse_known_hosts(path))
            except InputError as exc:
                raise HostKeyUnknown(str(exc)) from None
            self._parsed[path] = cached
        return cached[1]

    def check_user_files(self) -> None:
        """Read every user known_hosts file now, before anything is dialled: one that cannot be read (a FIFO, a
        device, over the limit, not known_hosts) is an InputError naming it (exit 2), not a failure per node."""
        for path in self.user_files:
            with contextlib.suppress(OSError):
                self._parsed[path] = (path.stat().st_mtime, parse_known_hosts(path))

    def pin(self, target: SshTarget, key: asyncssh.SSHKey) -> None:
        """Add the key to geosched's known_hosts: under a lock, then one atomic rename."""
        self.pinned_file.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.pinned_file.with_name(self.pinned_file.name + ".lock")
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                current = self.pinned_file.read_text(encoding="utf-8") if self.pinned_file.exists() else ""
                line = known_hosts_line(target.address, target.port, key)
                if line in current.splitlines():
                    return
                if current and not current.endswith("\n"):
                    current += "\n"
                write_file(self.pinned_file, current + line + "\n", mode=PRIVATE)  # store state, as ~/.ssh's
                self._parsed.pop(self.pinned_file, None)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def default_user_files() -> list[Path]:
    path = Path("~/.ssh/known_hosts").expanduser()
    return [path] if path.is_file() else []


def parse_known_hosts(path: Path) -> asyncssh.SSHKnownHosts:
    """A known_hosts file through the gate (a regular file of at most 16 MiB, its size before a byte is read),
    then parsed by asyncssh, which would read it whole and block on a FIFO: `--known-hosts` as a FIFO held `probe
    run` past its --deadline, /dev/zero or a sparse file took 2 GB to a MemoryError."""
    text = read_text(path, Kind.KNOWN_HOSTS)
    try:
        return asyncssh.import_known_hosts(text)
    except (ValueError, asyncssh.KeyImportError) as exc:
        raise InputError(str(path), "", f"not a known_hosts file ({type(exc).__name__})") from None
