"""The plane's teardown (what the session fixture's `plane.stop()` runs) leaves nothing behind: no process of the
plane alive and none of the ports its processes listened on still accepting connections (issue 20, item 2: "clean
teardown (no process, no port left)").

A plane of its own, one cluster without Kueue (the kubeadm-gang spec: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok), started with Plane.start as the fixture starts the session's. The ports are read from the
kernel, not from the harness's own bookkeeping: each process's listening TCP sockets (its /proc/PID/fd socket
inodes matched against /proc/net/tcp and tcp6 in state LISTEN), so a port a component opened that the harness does
not know of is checked too.
"""

from __future__ import annotations

import os
import shutil
import socket
from contextlib import closing
from pathlib import Path

import pytest

from tests.realkube import binaries
from tests.realkube.plane import GANG, SPECS, Plane

pytestmark = pytest.mark.realkube
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's `st` column (include/net/tcp_states.h)


Endpoint = tuple[int, str, int]  # address family, address, port


def listening(pid: int) -> set[Endpoint]:
    """The TCP endpoints process `pid` listens on, as the kernel lists them."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed since the listing
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    found = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == LISTEN and fields[9] in inodes:
                address, port = fields[1].rsplit(":", 1)
                found.add((family, _address(family, address), int(port, 16)))
    return found


def _address(family: int, hexed: str) -> str:
    """/proc/net/tcp's address: the in-memory bytes as hex, in 32-bit words of host (little-endian) order."""
    raw = b"".join(bytes.fromhex(hexed[i:i + 8])[::-1] for i in range(0, len(hexed), 8))
    text = socket.inet_ntop(family, raw)
    # A wildcard listener is reached on loopback.
    return {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(text, text)


def accepts(endpoint: Endpoint) -> bool:
    family, address, port = endpoint
    with closing(socket.socket(family, socket.SOCK_STREAM)) as s:
        s.settimeout(2)
        return s.connect_ex((address, port)) == 0


def test_stop_leaves_no_process_and_no_listening_port(tmp_path: Path) -> None:
    try:
        bins = binaries.find()
    except binaries.Missing as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the real control plane is not built: {exc}", pytrace=False)
        pytest.skip("the real control plane is not built (run scripts/realkube build)")
    plane = Plane.start(bins, [s for s in SPECS if s.name == GANG])
    try:
        assert plane.control.etcd is not None
        procs = [plane.control.etcd.proc, *plane[GANG].procs]
        assert {p.name for p in procs} == {"etcd", *(f"{GANG}/{c}" for c in (
            "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"))}
        assert all(p.alive() for p in procs)
        endpoints = {p.name: listening(p.pid) for p in procs}
        # What the harness knows it started servers on is among what the kernel lists, and everything listed
        # accepts connections now (so "refused" after stop means the teardown closed it).
        assert plane[GANG].port in {port for _, _, port in endpoints[f"{GANG}/kube-apiserver"]}
        assert int(plane.control.etcd.url.rsplit(":", 1)[1]) in {port for _, _, port in endpoints["etcd"]}
        assert all(accepts(e) for found in endpoints.values() for e in found), endpoints
    finally:
        plane.stop()
        shutil.rmtree(plane.directory, ignore_errors=True)
    alive = [p.name for p in procs if Path(f"/proc/{p.pid}").exists()]
    assert alive == [], f"processes of the plane left after stop: {alive}"
    left = {name: sorted(e for e in found if accepts(e)) for name, found in endpoints.items()}
    assert all(not v for v in left.values()), f"ports still accepting connections after stop: {left}"
