"""Low-level helpers: `ip` invocations, namespace process sweeps, slot locks, stale cleanup.

Naming scheme (shared with `Testbed` so that stale cleanup can find leftovers):
every resource of one testbed instance starts with ``gstb<slot:02d>-<token>``,
where ``slot`` (0..15) selects a /19 of 198.18.0.0/15 and ``token`` is random.
Network namespaces get ``<prefix>-router`` / ``<prefix>-h<N>``, the single link
in the root namespace is named exactly ``<prefix>`` and the work directory is
``$TMPDIR/<prefix>-XXXX``.  A slot is owned by whoever holds an abstract unix
socket, which the kernel releases when the owner dies, so "slot lock is free"
reliably means "everything with this slot prefix is a leftover".
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

SLOT_COUNT = 16
NETNS_DIR = Path("/run/netns")
BENCHMARK_NET = "198.18.0.0/15"
_GUARD_METRIC_BASE = 1000
_PREFIX_RE = re.compile(r"^gstb(?P<slot>\d{2})-(?P<token>[0-9a-f]{6})(?:-|$)")


class TestbedError(RuntimeError):
    """Setup, teardown or a testbed command failed."""

    __test__ = False  # keep pytest from collecting this as a test class


def slot_prefix(slot: int) -> str:
    return f"gstb{slot:02d}-"


def ip_bin() -> str:
    found = shutil.which("ip") or ("/usr/sbin/ip" if Path("/usr/sbin/ip").exists() else None)
    if found is None:
        raise TestbedError("iproute2 `ip` not found")
    return found


def run_checked(argv: Sequence[str], *, input: str | None = None, timeout: float = 30.0) -> str:
    """Run a setup command; on failure raise with its stderr (the only useful diagnostic)."""
    proc = subprocess.run(list(argv), input=input, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        shown = input if input is None or len(input) < 2000 else input[:2000] + "..."
        raise TestbedError(
            f"command failed ({proc.returncode}): {list(argv)}\nstderr: {proc.stderr.strip()}\nstdin: {shown}"
        )
    return proc.stdout


def ip_batch(commands: Iterable[str], *, netns: str | None = None, force: bool = False) -> None:
    """Run many `ip` commands in one process: ~50x cheaper than one exec each."""
    argv = [ip_bin()]
    if netns is not None:
        argv += ["-n", netns]
    if force:
        argv.append("-force")
    argv += ["-batch", "-"]
    text = "".join(c + "\n" for c in commands)
    if not text:
        return
    if force:
        # -force keeps going after errors, which is what cleanup wants; errors are expected
        # there (resource already gone), so they are not reported.
        subprocess.run(argv, input=text, capture_output=True, text=True, timeout=60, check=False)
    else:
        run_checked(argv, input=text, timeout=60)


def list_netns() -> list[str]:
    if not NETNS_DIR.is_dir():
        return []
    return sorted(p.name for p in NETNS_DIR.iterdir())


def _netns_inodes(names: Iterable[str]) -> set[tuple[int, int]]:
    keys: set[tuple[int, int]] = set()
    for name in names:
        try:
            st = os.stat(NETNS_DIR / name)
        except OSError:
            continue
        keys.add((st.st_dev, st.st_ino))
    return keys


def pids_in_netns(names: Iterable[str]) -> list[int]:
    """PIDs whose network namespace is one of `names`; a /proc scan beats N `ip netns pids`."""
    keys = _netns_inodes(names)
    if not keys:
        return []
    pids: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{entry}/ns/net")
        except OSError:
            continue  # exited meanwhile, or a zombie
        if (st.st_dev, st.st_ino) in keys:
            pids.append(int(entry))
    return pids


def kill_netns_processes(names: Sequence[str], *, timeout: float = 5.0) -> list[int]:
    """SIGKILL everything living in the namespaces; returns pids that would not die."""
    deadline = time.monotonic() + timeout
    me = os.getpid()
    while True:
        pids = [p for p in pids_in_netns(names) if p != me]
        if not pids:
            return []
        if time.monotonic() > deadline:
            return pids
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)  # real sleep: real processes take a moment to die after SIGKILL


def delete_netns(names: Sequence[str]) -> list[str]:
    """Delete namespaces (tolerating missing ones); returns names still present."""
    if names:
        ip_batch([f"netns del {n}" for n in names], force=True)
    present = set(list_netns())
    return [n for n in names if n in present]


def root_links_with_prefix(prefix: str) -> list[str]:
    out = run_checked([ip_bin(), "-o", "link", "show"])
    names: list[str] = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) < 2:
            continue
        name = parts[1].strip().split("@", 1)[0]
        if name.startswith(prefix):
            names.append(name)
    return names


def delete_root_link(name: str) -> None:
    subprocess.run(
        [ip_bin(), "link", "del", "name", name],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def guard_metric(slot: int) -> int:
    return _GUARD_METRIC_BASE + slot


def add_guard_route(slot: int) -> None:
    """Root-namespace `unreachable 198.18.0.0/15` so a mistyped benchmark address fails
    locally instead of leaving the machine via the default route.  One per slot (the
    metric makes it unique) so concurrent testbeds can add and remove theirs freely."""
    run_checked([ip_bin(), "route", "add", "unreachable", BENCHMARK_NET, "metric", str(guard_metric(slot))])


def delete_guard_route(slot: int) -> None:
    subprocess.run(
        [ip_bin(), "route", "del", "unreachable", BENCHMARK_NET, "metric", str(guard_metric(slot))],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def guard_route_slots() -> set[int]:
    out = run_checked([ip_bin(), "-o", "route", "show", "exact", BENCHMARK_NET])
    slots: set[int] = set()
    for m in re.finditer(r"^unreachable \S+ .*?metric (\d+)", out, re.MULTILINE):
        slot = int(m.group(1)) - _GUARD_METRIC_BASE
        if 0 <= slot < SLOT_COUNT:
            slots.add(slot)
    return slots


class SlotLock:
    """Exclusive ownership of one address slot, released by the kernel if we die."""

    def __init__(self, slot: int, sock: socket.socket) -> None:
        self.slot = slot
        self._sock: socket.socket | None = sock

    @classmethod
    def try_acquire(cls, slot: int) -> SlotLock | None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(f"\0geosched-testbed-slot-{slot:02d}")
        except OSError:
            sock.close()
            return None
        return cls(slot, sock)

    def release(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def clean_slot(slot: int) -> list[str]:
    """Remove every leftover resource of `slot`. Caller must hold the slot lock.

    Returns descriptions of what could not be removed.
    """
    prefix = slot_prefix(slot)
    problems: list[str] = []
    names = [n for n in list_netns() if n.startswith(prefix)]
    if names:
        stuck = kill_netns_processes(names)
        if stuck:
            problems.append(f"processes would not die: {stuck}")
        left = delete_netns(names)
        if left:
            problems.append(f"namespaces not deleted: {left}")
    for link in root_links_with_prefix(prefix):
        delete_root_link(link)
    if slot in guard_route_slots():
        delete_guard_route(slot)
    for d in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        if _PREFIX_RE.match(d.name) and d.is_dir():
            shutil.rmtree(d, ignore_errors=True)
            if d.exists():
                problems.append(f"could not remove {d}")
    return problems


def cleanup_stale() -> list[str]:
    """Remove leftovers of crashed testbeds (any slot nobody owns). Safe to call any time.

    Slots owned by a live testbed (in this or another process) are left alone.
    Returns descriptions of what could not be removed.
    """
    # One listing of each kind up front: this runs at every testbed start.
    names = list_netns()
    links = root_links_with_prefix("gstb")
    temps = [p.name for p in Path(tempfile.gettempdir()).glob("gstb*")]
    dirty = {int(m.group("slot")) for m in (_PREFIX_RE.match(n) for n in [*names, *links, *temps]) if m is not None}
    dirty |= guard_route_slots()
    problems: list[str] = []
    for slot in sorted(dirty):
        lock = SlotLock.try_acquire(slot)
        if lock is None:
            continue
        try:
            problems += clean_slot(slot)
        finally:
            lock.release()
    return problems


def missing_requirements() -> list[str]:
    """Reasons the testbed cannot run here (empty list: it can)."""
    reasons: list[str] = []
    if os.geteuid() != 0:
        reasons.append("must run as root (network namespaces, TUN, sshd)")
    for tool in ("ip", "sshd", "ssh", "ssh-keygen", "ssh-keyscan", "iperf3", "ping", "setpriv", "sysctl"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            reasons.append(f"`{tool}` not installed")
    if shutil.which("gcc") is None and shutil.which("cc") is None:
        reasons.append("no C compiler (gcc) to build the delay stage")
    if not Path("/dev/net/tun").exists():
        reasons.append("/dev/net/tun missing")
    if not reasons:
        probe = subprocess.run([ip_bin(), "netns", "list"], capture_output=True, text=True, timeout=10, check=False)
        if probe.returncode != 0:
            reasons.append(f"`ip netns` unavailable: {probe.stderr.strip()}")
    return reasons
