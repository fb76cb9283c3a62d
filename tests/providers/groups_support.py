"""What the node group tests of EKS and GKE share: `fast` settings (test_nodegroups.py, test_nodepools.py), and for
the SIGKILL campaigns (test_nodegroups_kill.py, test_nodepools_kill.py) the settings both the killed child and
`down` run with, the journal moment to kill at, the kill itself, and what a clean `down` leaves."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from geosched.providers import journal
from geosched.providers.nodegroups import journal as groups_journal
from geosched.providers.nodegroups.backend import open_backend
from geosched.providers.nodegroups.launch import BackendFor, GroupSettings, down
from geosched.retry import RetryPolicy
from geosched.store import Store

SETTLE_S = 8.0


def fast(**overrides: object) -> GroupSettings:
    base: dict[str, object] = {"poll_s": 0.01, "call_timeout_s": 5.0, "settle_s": 1.0,
                               "retry": RetryPolicy(attempts=3, initial_s=0.01, max_s=0.05)}
    base.update(overrides)
    return GroupSettings(**base)  # type: ignore[arg-type]


def settings() -> GroupSettings:
    return GroupSettings(poll_s=0.05, call_timeout_s=10.0, settle_s=SETTLE_S,
                         retry=RetryPolicy(attempts=3, initial_s=0.02, max_s=0.1))


def row_in(home: Path, gang: str, state: str) -> Callable[[], bool]:
    def seen() -> bool:
        with Store(home) as store:
            return any(r.state == state for r in groups_journal.groups(store, gang=gang))
    return seen


def kill_when(child: Callable[..., None], args: tuple[Any, ...], gang: str, ready: Callable[[], bool],
              limit_s: float = 60.0) -> None:
    """Run the provisioning process `child(*args)` and SIGKILL it as soon as `ready()` holds."""
    proc: Any = multiprocessing.get_context("spawn").Process(target=child, args=args)
    proc.start()
    try:
        deadline = time.monotonic() + limit_s
        while not ready():
            assert time.monotonic() < deadline, f"the moment to kill {gang} never came"
            assert proc.is_alive(), "the child ended before the moment to kill it"
            time.sleep(0.01)  # real sleep: polling a real child process and the cloud double's server
    finally:
        proc.kill()  # SIGKILL, this child only
        proc.join(10.0)
    assert proc.exitcode == -9, "the child must die by the kill, not finish"


def assert_clean(home: Path, gang: str, pools: Callable[[], Mapping[str, Any]], kind: str,
                 backend_for: BackendFor = open_backend) -> None:
    """`down` ends the gang without error, closes every journal row, and `pools()` (the cloud's) holds none."""
    with Store(home) as store:
        result = down(store, gang, backend_for, settings())
        assert (result.state, result.errors) == ("terminated", ())
        assert groups_journal.groups(store, gang=gang, states=groups_journal.OPEN_STATES) == []
        assert journal.gang_record(store, gang).state == "terminated"  # type: ignore[union-attr]
    assert pools() == {}, f"down must leave no {kind} of the gang"
