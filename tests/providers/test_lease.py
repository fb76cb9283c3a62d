"""The gang lease (providers/lease.py) on a real store, held by real processes: another live holder refuses, a dead
one (or a pid the kernel gave to another process since) holds nothing, the holder may take it again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from geosched.providers import lease
from geosched.store.db import Store


def plant(store: Store, gang: str, pid: int, started: str, verb: str = "up") -> None:
    """A lease as another process's `lease.held` writes it."""
    with store.transaction() as db:
        db.execute("INSERT OR REPLACE INTO prov_meta (key, value) VALUES (?, ?)",
                   (f"lease:{gang}", json.dumps({"verb": verb, "pid": pid, "started": started, "since": 0.0})))


@pytest.fixture
def other() -> subprocess.Popen[bytes]:
    # A live process of another program that holds a lease: it only has to outlive the test (it is killed after).
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def test_liveness_is_the_pid_and_its_start_time() -> None:
    assert lease.live(lease.Holder("up", 1, "5", 0.0), lambda _pid: "5")
    assert not lease.live(lease.Holder("up", 1, "5", 0.0), lambda _pid: "6")  # the pid reused by another process
    assert not lease.live(lease.Holder("up", 1, "5", 0.0), lambda _pid: None)
    assert lease.live(lease.Holder("up", 1, "", 0.0), lambda _pid: "6")  # no start time recorded: the pid alone

def test_a_live_holder_refuses_in_one_line_naming_it(tmp_path: Path, other: subprocess.Popen[bytes]) -> None:
    with Store(tmp_path) as store:
        plant(store, "g1", other.pid, lease.process_start(other.pid) or "")
        with pytest.raises(lease.GangBusy) as caught, lease.held(store, "g1", "down"):
            pytest.fail("taken while another process holds it")
        assert f"held by `geosched up` (pid {other.pid}," in str(caught.value)
        assert "\n" not in str(caught.value)
        assert lease.holder(store, "g1") == lease.Holder("up", other.pid, lease.process_start(other.pid) or "", 0.0)
        with lease.held(store, "g2", "down"):  # another gang is free
            pass


def test_a_dead_holder_and_a_reused_pid_hold_nothing(tmp_path: Path, other: subprocess.Popen[bytes]) -> None:
    started = lease.process_start(other.pid)
    assert started, "a running process has a start time in /proc"
    with Store(tmp_path) as store:
        # The same pid, started at another time: the kernel gave the holder's pid to a new process.
        plant(store, "g1", other.pid, str(int(started) + 1))
        with lease.held(store, "g1", "down"):
            assert lease.holder(store, "g1").pid == os.getpid()  # type: ignore[union-attr]
        assert lease.holder(store, "g1") is None, "released at the end of the block"
        other.kill()
        other.wait()
        plant(store, "g1", other.pid, started)
        with lease.held(store, "g1", "down"):
            pass


def test_the_holder_takes_it_again_and_only_the_outer_block_releases(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        with lease.held(store, "g1", "up"):
            with lease.held(store, "g1", "provision"):
                pass
            assert lease.holder(store, "g1").verb == "up"  # type: ignore[union-attr]
        assert lease.holder(store, "g1") is None


def test_a_damaged_lease_holds_nothing(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        with store.transaction() as db:
            db.execute("INSERT INTO prov_meta (key, value) VALUES ('lease:g1', '{\"pid\": \"x\"')")
        with lease.held(store, "g1", "down"):
            assert lease.holder(store, "g1").verb == "down"  # type: ignore[union-attr]


def test_the_start_time_is_read_past_a_command_name_with_parentheses_and_spaces() -> None:
    real = Path("/proc/self/stat").read_text(encoding="ascii")
    start = real[real.rfind(")") + 2:].split()[19]
    odd = real[:real.index("(")] + "(a) b (c)" + real[real.rfind(")"):]  # a name a process may give itself
    assert lease.start_in(odd) == start
    assert lease.start_in(odd.replace(") S ", ") Z ", 1).replace(") R ", ") Z ", 1)) is None  # a zombie has exited
    assert lease.process_start(os.getpid()) == lease.start_in(Path(f"/proc/{os.getpid()}/stat").read_text())
