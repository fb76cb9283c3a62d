"""A provisioning process killed with SIGKILL while it makes a GKE node pool leaves a journal that `down` cleans
fully: no node pool of the gang is left in the cluster and no journal row stays open (the GKE twin of
test_nodegroups_kill.py, on the GKE REST double over a real socket with google-cloud-container unchanged).

Three moments: while the process waits for a created pool to come up (its create operation held RUNNING, the pool
PROVISIONING); while its nodePools.create request is held by the server (the double stalls it, then creates the
pool: it appears after the process died, and `down` finds it through the intent row, waiting for the intent to
settle); and while the nodePools.delete of a pool that failed for capacity (a stockout) is held (the row says
`deleting`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from geosched.providers.gang import plan_gang
from geosched.providers.nodegroups import journal as groups_journal
from geosched.providers.nodegroups.gke import Gke
from geosched.providers.nodegroups.launch import provision, read_cluster
from geosched.store import Store
from geosched_emulators.gke import GkeDouble, GkeFault
from tests.providers import groups_support
from tests.providers.gke_support import CLUSTER, LOCATION, PROJECT, make_cluster, request
from tests.providers.groups_support import row_in, settings
from tests.providers.prov_support import gcp_provider

pytestmark = pytest.mark.integration


def child(home: str, endpoint: str, gang: str) -> None:
    """The provisioning process: what `geosched provision --cluster --provider gcp` runs, in a process of its own."""
    os.environ["GEOSCHED_GKE_ENDPOINT"] = endpoint
    with Store(Path(home)) as store:
        gke = Gke(LOCATION, project=PROJECT)
        plan = plan_gang(request(2), {"gcp": gcp_provider("http://127.0.0.1:9")}, store)
        provision(plan, read_cluster(gke, CLUSTER, settings()), gke, store, gang=gang, settings=settings())


def kill_when(home: Path, gke: GkeDouble, gang: str, ready: Callable[[], bool]) -> None:
    groups_support.kill_when(child, (str(home), gke.endpoint, gang), gang, ready)


def assert_clean(home: Path, gke: GkeDouble, gang: str) -> None:
    groups_support.assert_clean(home, gang, gke.pools, "node pool",
                              lambda _p, _r: Gke(LOCATION, project=PROJECT, endpoint=gke.endpoint))


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
    assert_clean(home, gke, "k-wait")


def test_killed_while_the_create_is_held_by_the_server(tmp_path: Path, gke: GkeDouble) -> None:
    # Held for less than the settle time, so the pool lands while `down` still looks for it.
    held = gke.inject(GkeFault.stall(4.0), method="nodePools.create")
    home = tmp_path / "home"
    kill_when(home, gke, "k-held", lambda: held.hits > 0)  # the server holds the create now
    assert gke.pools() == {}, "killed before the held create was served"
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
    assert_clean(home, gke, "k-back")
