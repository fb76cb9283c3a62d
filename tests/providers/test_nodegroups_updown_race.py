"""`geosched up GANG` and `geosched down GANG` at once (a second terminal; a CI job cancelled and re-run while the
first still runs), on EKS managed node groups (moto) and GKE node pools (the GKE double): the real CLI in a process
of its own, stopped (SIGSTOP, by itself) right after a chosen committed store write, while the parent runs the other
command, as a user would, against the same store.

Before the lease (providers/lease.py), `down` during `up`'s create closed the gang and its usage, then `up`'s create
landed: a group left standing, charged, with the gang `terminated`. Now the second command refuses in one line
naming the first's verb and pid, and changes nothing; the first goes on. Both orders:

- `down` while `up` is between its group's intent and the create call (the create in flight): refused, gang and
  rows as they were; then either `up` goes on to its end (its nodes never join: rolled back) or it is SIGKILLed (a
  cancelled job: its lease dies with it) and `down` takes the gang down;
- `up --name GANG` while `down` has closed the gang and not yet deleted its group: refused, nothing created; `down`
  goes on;
- `down --all` while a `provision --cluster` holds one gang: that gang left (its line in the rows), the others down.

Each ends with the gang `terminated`, no open group row, no open usage interval, and no group or pool of the gang
in the cloud.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from geosched.providers import journal
from geosched.providers.nodegroups import journal as groups_journal
from geosched.report.ledger import ledger_intervals
from geosched.store.db import Store
from geosched_emulators import Ec2FaultProxy, MotoServer
from geosched_emulators.gke import GkeDouble
from tests.kubeemu import MultiCluster
from tests.providers.eks_support import NODE_ROLE, REGION, EksCluster, make_cluster
from tests.providers.gke_support import CLUSTER, LOCATION
from tests.providers.test_nodegroups_kill_steps import Cloud, eks_cloud, fast_clock, gke_cloud, job
from tests.providers.test_up_cli import run

pytestmark = pytest.mark.integration

LIMIT_S = 120.0  # the most a stopped or finishing child is waited for (a loaded 2-core machine), never a pass bar


def stop_after(home: Path, step: str) -> None:
    """The process stops itself (SIGSTOP) right after its first committed store transaction made by `step`
    ("file.py:function"): the commit is on disk, nothing after it has run."""
    original = Store.transaction

    @contextmanager
    def transaction(self: Store) -> Iterator[Any]:
        with original(self) as db:
            yield db
        caller = sys._getframe(2)
        name = f"{caller.f_code.co_filename.rsplit('/', 1)[-1]}:{caller.f_code.co_name}"
        marker = home / "stopped"
        if name == step and not marker.exists():
            marker.write_text(name, encoding="utf-8")
            os.kill(os.getpid(), signal.SIGSTOP)

    Store.transaction = transaction  # type: ignore[method-assign]


def child(home: str, env: dict[str, str], argv: list[str], step: str) -> None:
    from geosched.cli.main import main

    os.environ.update(env)
    fast_clock(setattr)
    Path(home).mkdir(parents=True, exist_ok=True)
    stop_after(Path(home), step)
    sys.argv = ["geosched", "--home", home, *argv]
    main()


def state_of(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except FileNotFoundError:
        return "gone"
    return stat[stat.rfind(")") + 2:].split()[0]


def start_stopped(home: Path, cloud: Cloud, argv: list[str], step: str) -> Any:
    """The child, started and stopped at `step` (asserted: a run that ends before it proves nothing)."""
    mp = multiprocessing.get_context("forkserver")
    mp.set_forkserver_preload(["geosched.cli.main", "geosched.providers.nodegroups.eks",
                               "geosched.providers.nodegroups.gke", __name__])
    proc = mp.Process(target=child, args=(str(home), cloud.env, argv, step))
    proc.start()
    deadline = time.monotonic() + LIMIT_S
    while state_of(proc.pid) not in ("T", "t"):
        assert proc.is_alive(), f"the child ended (exit {proc.exitcode}) before its step {step}"
        assert time.monotonic() < deadline, f"the child never reached its step {step}"
        time.sleep(0.02)  # the real child process reaching its step, on its own time
    return proc


def resume(proc: Any) -> int | None:
    os.kill(proc.pid, signal.SIGCONT)
    proc.join(LIMIT_S)
    assert not proc.is_alive(), "the resumed child did not end"
    return proc.exitcode  # type: ignore[no-any-return]


def open_rows(home: Path, gang: str) -> tuple[list[str], list[str]]:
    with Store(home) as store:
        rows = [r.name for r in groups_journal.groups(store, gang=gang, states=groups_journal.OPEN_STATES)]
        charged = [i.name for i in ledger_intervals(store) if i.end is None and i.job in (gang, "train")]
    return rows, charged


def gang_state(home: Path, gang: str) -> str:
    with Store(home) as store:
        record = journal.gang_record(store, gang)
    assert record is not None
    return record.state


def nothing_left(home: Path, cloud: Cloud, gang: str) -> None:
    assert gang_state(home, gang) == "terminated"
    assert open_rows(home, gang) == ([], []), "an open group row or usage interval after down"
    assert cloud.left(home, gang) == [], "left in the cloud"


def refused_by(result: Any, verb: str, pid: int) -> None:
    assert result.exit_code == 1, result.output
    line = str(result.exception)
    assert f"held by `geosched {verb}` (pid {pid}," in line and "\n" not in line, line


def up_argv(kind: str, spec_file: Path, kubeconfig: Path, gang: str, cluster: str) -> list[str]:
    where = (["--region", REGION, "--node-role", NODE_ROLE] if kind == "eks"
             else ["--provider", "gcp", "--region", LOCATION])
    return ["up", str(spec_file), "--cluster", cluster, *where, "--kubeconfig", str(kubeconfig), "--name", gang,
            "--join-timeout", "1", "--yes", "-o", "json"]


def down_during_up(tmp_path: Path, cloud: Cloud, kind: str, cluster: str, then: str,
                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`down` while `up`'s first create is in flight (stopped just after its group's intent), refused; then `up`
    resumed to its end (`then` = "resume") or SIGKILLed ("kill"), and `down` again, which must leave nothing."""
    for k, v in cloud.env.items():
        monkeypatch.setenv(k, v)
    fast_clock(monkeypatch.setattr)
    gang = f"{kind}-{then}"
    home = tmp_path / gang
    (tmp_path / "kube").mkdir(exist_ok=True)
    with MultiCluster(1, names=[cluster], directory=tmp_path / "kube") as kube:
        argv = up_argv(kind, job(tmp_path / "train.yaml"), kube.kubeconfig, gang, cluster)
        up = start_stopped(home, cloud, argv, "journal.py:intend")
        rows_before = open_rows(home, gang)
        assert rows_before[0], "up is stopped with its group's intent journalled"
        refused_by(run(home, "down", gang, "--yes", "-o", "json"), "up", up.pid)
        # Refused means untouched: the gang still `up`'s, its intent row open, nothing charged or closed.
        assert gang_state(home, gang) == "provisioning"
        assert open_rows(home, gang) == rows_before
        if then == "kill":
            up.kill()  # SIGKILL: a cancelled CI job; a stopped process dies at once
            up.join(LIMIT_S)
        else:
            assert resume(up) == 1  # its nodes never join (no kubelet): every zone rolled back, up fails
        result = run(home, "down", gang, "--yes", "-o", "json")
        assert result.exit_code == 0, result.output
    nothing_left(home, cloud, gang)


def up_during_down(tmp_path: Path, cloud: Cloud, kind: str, cluster: str, provision: list[str],
                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`up --name GANG` while `down GANG` has closed the gang (stopped just after `terminating`), refused and
    creating nothing; `down` then ends, leaving nothing."""
    for k, v in cloud.env.items():
        monkeypatch.setenv(k, v)
    fast_clock(monkeypatch.setattr)
    gang = f"{kind}-down"
    home = tmp_path / gang
    made = run(home, "provision", *provision, "--gpu", "H100:8", "--nodes", "2", "--name", gang, "--yes",
               "-o", "json")
    assert made.exit_code == 0, made.output
    standing = cloud.left(home, gang)
    assert standing, "the gang's group exists before down"
    (tmp_path / "kube").mkdir(exist_ok=True)
    with MultiCluster(1, names=[cluster], directory=tmp_path / "kube") as kube:
        down = start_stopped(home, cloud, ["down", gang, "--yes", "-o", "json"], "journal.py:set_gang")
        assert gang_state(home, gang) == "terminating"
        argv = up_argv(kind, job(tmp_path / "train.yaml"), kube.kubeconfig, gang, cluster)
        refused_by(run(home, *argv), "down", down.pid)
        assert cloud.left(home, gang) == standing, "up created or deleted something"
        assert resume(down) == 0
    nothing_left(home, cloud, gang)


# --- EKS ----------------------------------------------------------------------------------------------------------

@pytest.fixture
def eks(moto: MotoServer, proxy: Ec2FaultProxy) -> EksCluster:
    return make_cluster(moto.url, ("use1-az2", "use1-az6"))


@pytest.mark.parametrize("then", ["resume", "kill"])
def test_eks_down_during_up_is_refused_and_leaves_nothing(tmp_path: Path, eks: EksCluster, proxy: Ec2FaultProxy,
                                                          then: str, monkeypatch: pytest.MonkeyPatch) -> None:
    down_during_up(tmp_path, eks_cloud(eks, proxy), "eks", eks.name, then, monkeypatch)


def test_eks_up_during_down_is_refused_and_creates_nothing(tmp_path: Path, eks: EksCluster, proxy: Ec2FaultProxy,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    up_during_down(tmp_path, eks_cloud(eks, proxy), "eks", eks.name,
                   ["--cluster", eks.name, "--region", REGION, "--node-role", NODE_ROLE], monkeypatch)


# --- GKE ----------------------------------------------------------------------------------------------------------

def test_gke_down_during_up_is_refused_and_leaves_nothing(tmp_path: Path, gke: GkeDouble,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    down_during_up(tmp_path, gke_cloud(gke), "gke", CLUSTER, "kill", monkeypatch)


def test_gke_up_during_down_is_refused_and_creates_nothing(tmp_path: Path, gke: GkeDouble,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    up_during_down(tmp_path, gke_cloud(gke), "gke", CLUSTER,
                   ["--cluster", CLUSTER, "--provider", "gcp", "--region", LOCATION], monkeypatch)


def test_down_all_leaves_a_gang_another_command_holds_and_takes_the_others_down(
        tmp_path: Path, eks: EksCluster, proxy: Ec2FaultProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """`down --all` while a `provision --cluster` of one gang is stopped mid-way: that gang is a row with the one
    line naming the holder (exit 1) and keeps its group; the other gang is taken down; after the holder was
    killed, `down GANG` leaves nothing."""
    cloud = eks_cloud(eks, proxy)
    for k, v in cloud.env.items():
        monkeypatch.setenv(k, v)
    fast_clock(monkeypatch.setattr)
    home = tmp_path / "home"
    where = ["--cluster", eks.name, "--region", REGION, "--node-role", NODE_ROLE, "--gpu", "H100:8", "--nodes", "2"]
    made = run(home, "provision", *where, "--name", "free", "--yes", "-o", "json")
    assert made.exit_code == 0, made.output
    # The second gang's provision stopped once its group is created (billed), before it is marked ready.
    held = start_stopped(home, cloud, ["provision", *where, "--name", "held", "--yes", "-o", "json"],
                         "journal.py:mark")
    standing = cloud.left(home, "held")
    assert standing and cloud.left(home, "free")
    result = run(home, "down", "--all", "--yes", "-o", "json")
    assert result.exit_code == 1, result.output
    rows = {r["gang"]: r for r in json.loads(result.stdout)["items"]}
    assert rows["free"]["state"] == "terminated" and not rows["free"]["errors"]
    assert rows["held"]["state"] == "provisioning"
    assert [f"held by `geosched provision` (pid {held.pid}," in e for e in rows["held"]["errors"]] == [True]
    assert cloud.left(home, "free") == [] and cloud.left(home, "held") == standing
    held.kill()  # a cancelled job
    held.join(LIMIT_S)
    assert run(home, "down", "held", "--yes", "-o", "json").exit_code == 0
    nothing_left(home, cloud, "held")
    nothing_left(home, cloud, "free")
