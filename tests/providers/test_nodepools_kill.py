"""A provisioning process killed with SIGKILL while it makes a GKE node pool leaves a journal that `down` cleans
fully: no node pool of the gang is left in the cluster and no journal row stays open, nor any usage ledger interval
(one is open only while its pool exists). The GKE twin of test_nodegroups_kill.py, on the GKE REST double over a
real socket with google-cloud-container unchanged.

Three moments: while the process waits for a created pool to come up (its create operation held RUNNING, the pool
PROVISIONING); while its nodePools.create request is held by the server (the double stalls it, then creates the
pool: it appears after the process died, and `down` finds it through the intent row, waiting for the intent to
settle); and while the nodePools.delete of a pool that failed for capacity (a stockout) is held (the row says
`deleting`).
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from geosched.core.retry import RetryPolicy
from geosched.providers import journal
from geosched.providers.gang import plan_gang
from geosched.providers.nodegroups import journal as groups_journal
from geosched.providers.nodegroups.gke import Gke
from geosched.providers.nodegroups.launch import GroupSettings, down, provision, read_cluster
from geosched.report.ledger import ledger_intervals
from geosched.store.db import Store
from geosched_emulators.gke import GkeDouble, GkeFault
from tests.providers.gke_support import CLUSTER, LOCATION, PROJECT, make_cluster, request
from tests.providers.prov_support import gcp_provider

pytestmark = pytest.mark.integration

SETTLE_S = 8.0


def settings() -> GroupSettings:
    return GroupSettings(poll_s=0.05, call_timeout_s=10.0, settle_s=SETTLE_S,
                         retry=RetryPolicy(attempts=3, initial_s=0.02, max_s=0.1))


def child(home: str, endpoint: str, gang: str) -> None:
    """The provisioning process: what `geosched provision --cluster --provider gcp` runs, in a process of its own."""
    os.environ["GEOSCHED_GKE_ENDPOINT"] = endpoint
    with Store(Path(home)) as store:
        gke = Gke(LOCATION, project=PROJECT)
        plan = plan_gang(request(2), {"gcp": gcp_provider("http://127.0.0.1:9")}, store)
        provision(plan, read_cluster(gke, CLUSTER, settings()), gke, store, gang=gang, settings=settings())


def row_in(home: Path, gang: str, state: str) -> Callable[[], bool]:
    def seen() -> bool:
        with Store(home) as store:
            return any(r.state == state for r in groups_journal.groups(store, gang=gang))
    return seen


def kill_when(home: Path, gke: GkeDouble, gang: str, ready: Callable[[], bool], limit_s: float = 60.0) -> None:
    """Run the provisioning process and SIGKILL it as soon as `ready()` holds."""
    proc: Any = multiprocessing.get_context("spawn").Process(target=child, args=(str(home), gke.endpoint, gang))
    proc.start()
    try:
        deadline = time.monotonic() + limit_s
        while not ready():
            assert time.monotonic() < deadline, f"the moment to kill {gang} never came"
            assert proc.is_alive(), "the child ended before the moment to kill it"
            time.sleep(0.01)  # real sleep: polling a real child process and the GKE double's server threads
    finally:
        proc.kill()  # SIGKILL, this child only
        proc.join(10.0)
    assert proc.exitcode == -9, "the child must die by the kill, not finish"


def assert_clean(home: Path, gke: GkeDouble, gang: str) -> None:
    with Store(home) as store:
        result = down(store, gang, lambda _p, _r: Gke(LOCATION, project=PROJECT, endpoint=gke.endpoint), settings())
        assert (result.state, result.errors) == ("terminated", ())
        assert groups_journal.groups(store, gang=gang, states=groups_journal.OPEN_STATES) == []
        assert [i for i in ledger_intervals(store) if i.job == gang and i.end is None] == [], "charged past down"
        assert journal.gang_record(store, gang).state == "terminated"  # type: ignore[union-attr]
    assert gke.pools() == {}, "down must leave no node pool of the gang"


def charged(home: Path, gang: str) -> list[tuple[str, bool]]:
    """(node, still open) of each ledger interval of the gang."""
    with Store(home) as store:
        return sorted((i.name, i.end is None) for i in ledger_intervals(store) if i.job == gang)


@pytest.fixture
def gke() -> Iterator[GkeDouble]:
    with GkeDouble(operation_delay_s=0.05) as double:
        make_cluster(double)
        yield double


def test_killed_while_waiting_for_the_pool(tmp_path: Path, gke: GkeDouble) -> None:
    gke.inject(GkeFault.hold(), method="nodePools.create", times="always")
    home = tmp_path / "home"
    kill_when(home, gke, "k-wait", row_in(home, "k-wait", "created"))
    assert list(gke.pools()) == [f"{LOCATION}/{CLUSTER}/k-wait-1"], "the killed process left its pool behind"
    assert charged(home, "k-wait") == [("k-wait-1#0", True), ("k-wait-1#1", True)], "the pool exists: charged"
    assert_clean(home, gke, "k-wait")
    assert charged(home, "k-wait") == [("k-wait-1#0", False), ("k-wait-1#1", False)]


def test_killed_while_the_create_is_held_by_the_server(tmp_path: Path, gke: GkeDouble) -> None:
    # Held for less than the settle time, so the pool lands while `down` still looks for it.
    held = gke.inject(GkeFault.stall(4.0), method="nodePools.create")
    home = tmp_path / "home"
    kill_when(home, gke, "k-held", lambda: held.hits > 0)  # the server holds the create now
    assert gke.pools() == {}, "killed before the held create was served"
    assert charged(home, "k-held") == [], "no pool yet, so no interval: only the intent is journalled"
    assert_clean(home, gke, "k-held")
    # The held create has been served by now (the double logs a call once it answered): nothing it made is left.
    deadline = time.monotonic() + 30.0
    while gke.call_count("nodePools.create") == 0 and time.monotonic() < deadline:
        time.sleep(0.02)  # real sleep: the double's server thread serves the held create on its own time
    assert gke.call_count("nodePools.create", status=200) == 1
    assert gke.pools() == {}, "the pool the held create made after the kill must be gone"


def test_killed_while_rolling_back_a_failed_pool(tmp_path: Path, gke: GkeDouble) -> None:
    # The first zone's pool fails for a stockout (its operation's error; the pool left ERROR); its nodePools.delete
    # is held by the server when the process dies, so the journal says `deleting`.
    gke.inject(GkeFault.stockout(), method="nodePools.create")
    held = gke.inject(GkeFault.stall(4.0), method="nodePools.delete")
    home = tmp_path / "home"
    kill_when(home, gke, "k-back", lambda: held.hits > 0)
    with Store(home) as store:
        assert [r.state for r in groups_journal.groups(store, gang="k-back")] == ["deleting"]
    assert charged(home, "k-back") == [("k-back-1#0", True), ("k-back-1#1", True)], "deleting: still billed"
    assert_clean(home, gke, "k-back")


def test_killed_before_the_first_pools_row_is_still_a_node_pool_gang(tmp_path: Path, gke: GkeDouble) -> None:
    """Killed after the gang's row and its first attempt, before the first pool's intent (a step the kill campaign
    of test_nodegroups_kill_steps.py reaches): no pool row exists. `down` took the gang for a machine gang then and
    asked Compute Engine for its instances, which a GKE-only credential cannot: the gang stayed `terminating`."""
    from tests.providers.test_up_cli import run

    home = tmp_path / "home"
    with Store(home) as store:
        plan = plan_gang(request(2), {"gcp": gcp_provider("http://127.0.0.1:9")}, store)
        journal.create_gang(store, "k-first", journal.owner(store), request(2), node_groups=True)
        journal.start_attempt(store, "k-first", plan.candidates[0])
        assert groups_journal.is_nodegroup_gang(store, "k-first")
    result = run(home, "down", "k-first", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    assert '"errors": []' in result.output and '"state": "terminated"' in result.output, result.output
    assert gke.pools() == {}
