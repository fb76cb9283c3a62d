"""Kill campaign over every journal step of `geosched up` and `geosched down` on EKS managed node groups and GKE
node pools: the real CLI in a process of its own, SIGKILLed right after its k-th committed store write, for every k
the same command's unkilled run made (the steps are counted from the store, not listed by hand: a step added to the
journal is covered at once), plus seeded random moments in wall time (a request in flight when the process dies).
After each kill the parent runs what a user would, `geosched down GANG`, and checks that nothing is left: no node
group (moto's EKS) or node pool (the GKE double) of the gang, none of its cluster placement groups (the fault
proxy's) or launch templates (moto's), no open journal row, no open usage interval, the gang `terminated`.

`up`: the job's nodes never register (the cluster is tests/kubeemu: no kubelet), so one run walks every step `up`
has before placing: the gang and its attempt journalled, the group's intent, its creation (billed), the wait for its
nodes, its rollback (`deleting`, `deleted`), the next zone likewise, the gang `failed`. `down`: a gang that
`provision --cluster` made (its group ACTIVE), killed at each of `down`'s steps, then `down` again.

The CLI's waits are minutes long (GroupSettings: a 15 s poll, a 120 s settle); the campaign gives the node group
code a fast clock (`fast_settings`) in the child and in the parent, nothing else is changed. EKS runs every step;
GKE every step of `up` from the gang's row to the end of its first zone's attempt (the pool created, deleting) plus a
seeded sample of the others, and every step of `down` (the EKS path has the placement group and template parts, the
GKE path none). Its cost is printed (`-s`) per command.
"""

from __future__ import annotations

import inspect
import multiprocessing
import os
import random
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from geosched.core.retry import RetryPolicy
from geosched.providers import journal
from geosched.providers.config import ENV_ADMIN_CIDRS
from geosched.providers.nodegroups import journal as groups_journal
from geosched.providers.nodegroups import spec
from geosched.providers.nodegroups.launch import GroupSettings
from geosched.report.ledger import ledger_intervals
from geosched.store.db import Store
from geosched_emulators import Ec2FaultProxy, MotoServer
from geosched_emulators.gke import GkeDouble
from tests.kill import run_killable
from tests.kubeemu import MultiCluster
from tests.providers.eks_support import NODE_ROLE, REGION, EksCluster, make_cluster
from tests.providers.gke_support import CLUSTER, LOCATION, PROJECT
from tests.providers.prov_support import ADMIN_CIDR, aws_env
from tests.providers.test_up_cli import run

pytestmark = pytest.mark.integration

# Longer than a request the killed process had in flight takes to land on a loaded machine (the proxy and the
# double answer in milliseconds), so `down` still finds a group whose create was sent just before a random kill.
SETTLE_S = 3.0
RANDOM_KILLS = 4
GKE_UP_SAMPLE = 4  # besides the first zone's attempt (first_attempt)
SEED = 26


def fast_settings() -> GroupSettings:
    return GroupSettings(poll_s=0.05, call_timeout_s=10.0, settle_s=SETTLE_S,
                         retry=RetryPolicy(attempts=3, initial_s=0.02, max_s=0.1))


def fast_clock(setattr_: Callable[[Any, str, Any], None]) -> None:
    """The node group code's default settings (bound as default arguments when its modules were imported) replaced
    by `fast_settings()`: the CLI passes none, so these are what `up`, `provision` and `down` run with."""
    from geosched.providers.nodegroups import launch, resume

    fast = fast_settings()
    for module in (launch, resume):
        for fn in vars(module).values():
            if not inspect.isfunction(fn) or fn.__module__ != module.__name__:
                continue
            if fn.__defaults__:
                setattr_(fn, "__defaults__", tuple(fast if isinstance(d, GroupSettings) else d
                                                   for d in fn.__defaults__))
            if fn.__kwdefaults__:
                setattr_(fn, "__kwdefaults__", {k: fast if isinstance(d, GroupSettings) else d
                                                for k, d in fn.__kwdefaults__.items()})
    setattr_(resume, "GroupSettings", fast_settings)


def count_commits(home: Path, kill_at: int | None) -> None:
    """Every committed store transaction is a step: its caller is appended to HOME/steps (one line each), and the
    process SIGKILLs itself right after the `kill_at`-th commit."""
    done = [0]
    original = Store.transaction

    @contextmanager
    def transaction(self: Store) -> Iterator[Any]:
        with original(self) as db:
            yield db
        done[0] += 1
        caller = sys._getframe(2)
        with open(home / "steps", "a", encoding="utf-8") as f:
            f.write(f"{caller.f_code.co_filename.rsplit('/', 1)[-1]}:{caller.f_code.co_name}\n")
        if kill_at is not None and done[0] == kill_at:
            os.kill(os.getpid(), 9)  # SIGKILL, this process: the commit is on disk, nothing after it ran

    Store.transaction = transaction  # type: ignore[method-assign]


def child(home: str, env: dict[str, str], argv: list[str], kill_at: int | None,
          speed_up: Callable[[Callable[[Any, str, Any], None]], None] | None = None) -> None:
    """The `geosched` process under test (a forked child; may be SIGKILLed anywhere); `speed_up(setattr)` shortens
    the CLI's waits in it (this campaign's `fast_clock` by default; the ProvisioningRequest campaign passes its own)."""
    from geosched.cli.main import main

    os.environ.update(env)
    (speed_up or fast_clock)(setattr)
    Path(home).mkdir(parents=True, exist_ok=True)
    count_commits(Path(home), kill_at)
    sys.argv = ["geosched", "--home", home, *argv]
    main()


@dataclass
class Cloud:
    """What a run is checked against: the gang's groups or pools, placement groups and launch templates."""
    env: dict[str, str]
    left: Callable[[Path, str], list[str]]


def steps_of(home: Path) -> list[str]:
    path = home / "steps"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def spawn(mp: Any, home: Path, cloud: Cloud, argv: list[str], *, kill_at: int | None = None,
          kill_after_s: float | None = None) -> tuple[bool, float]:
    proc = mp.Process(target=child, args=(str(home), cloud.env, argv, kill_at))
    started = time.monotonic()
    killed = run_killable(proc, kill_after_s, 120.0)
    if kill_at is not None:
        assert proc.exitcode == -9, f"the child must die at step {kill_at}, not finish"
    return killed or proc.exitcode == -9, time.monotonic() - started


def down_and_check(home: Path, cloud: Cloud, gang: str, what: str) -> None:
    """`geosched down GANG` as a user runs it after the crash, then nothing of the gang may be left."""
    with Store(home) as store:
        known = journal.gang_record(store, gang) is not None
    if known:
        result = run(home, "down", gang, "--yes", "-o", "json")
        assert result.exit_code == 0, f"{what}: down: {result.output}"
        with Store(home) as store:
            assert groups_journal.groups(store, gang=gang, states=groups_journal.OPEN_STATES) == [], what
            assert [i.name for i in ledger_intervals(store) if i.end is None and i.job in (gang, "train")] == [], (
                f"{what}: charged past down")
            assert journal.gang_record(store, gang).state == "terminated", what  # type: ignore[union-attr]
    else:
        time.sleep(0.2)  # real sleep: nothing journalled, so no call was made; a stray one would land by now
    assert cloud.left(home, gang) == [], f"{what}: left behind"


def first_attempt(steps: list[str]) -> list[int]:
    """The 1-based steps from the gang's row to the end of its first zone's attempt (its intent, its group's
    created/deleting marks): the part of the journal every zone repeats."""
    begin = steps.index("journal.py:create_gang")
    end = steps.index("journal.py:finish_attempt", begin)
    return list(range(begin + 1, end + 2))


def job(path: Path) -> Path:
    path.write_text("apiVersion: geosched.io/v1alpha1\nkind: Job\nname: train\nimage: ghcr.io/example/train:1\n"
                    "workers: 2\ngpus_per_worker: 8\ngpu: H100\n", encoding="utf-8")
    return path


def campaign(tmp_path: Path, cloud: Cloud, name: str, argv: Callable[[str], list[str]],
             sample: int | None, monkeypatch: pytest.MonkeyPatch,
             setup: Callable[[Path, str], None] | None = None) -> dict[str, Any]:
    """Run `argv(gang)` once unkilled (its steps), then killed after each step (or a seeded sample of `sample`),
    then at RANDOM_KILLS seeded moments; `down` and the checks after each. `setup(home, gang)` makes what the
    command works on (a gang for `down`), in the parent."""
    fast_clock(monkeypatch.setattr)
    mp = multiprocessing.get_context("forkserver")
    mp.set_forkserver_preload(["geosched.cli.main", "geosched.providers.nodegroups.eks",
                               "geosched.providers.nodegroups.gke", __name__])
    rng = random.Random(f"{SEED}-{name}")
    started = time.monotonic()

    def one(label: str, **kill: Any) -> tuple[bool, float]:
        gang = f"{name}-{label}"
        home = tmp_path / gang
        if setup is not None:
            setup(home, gang)
        killed, seconds = spawn(mp, home, cloud, argv(gang), **kill)
        down_and_check(home, cloud, gang, f"{name} killed {kill}")
        return killed, seconds

    _, reference_s = one("ref")
    steps = steps_of(tmp_path / f"{name}-ref")  # the child's commits only: the setup ran in this process
    assert len(steps) >= 4, steps
    chosen = list(range(1, len(steps) + 1))
    if sample is not None and sample < len(chosen):
        # Sampled, but never without the first zone's whole attempt and the gang's own row: the moments a group or
        # pool exists in the cloud (created, deleting) and the one that leaked before (gang row, no group row).
        must = first_attempt(steps)
        chosen = sorted(must + rng.sample([k for k in chosen if k not in must], sample))
    for k in chosen:
        one(f"s{k}", kill_at=k)
    randomly = 0
    for i in range(RANDOM_KILLS):
        killed, _ = one(f"r{i}", kill_after_s=rng.uniform(0.0, reference_s))
        randomly += killed
    return {"command": name, "steps": len(steps), "killed_at_steps": len(chosen), "random": RANDOM_KILLS,
            "random_killed": randomly, "reference_s": round(reference_s, 2),
            "campaign_s": round(time.monotonic() - started, 1), "step_names": steps}


# --- EKS ----------------------------------------------------------------------------------------------------------

@pytest.fixture
def eks(moto: MotoServer, proxy: Ec2FaultProxy) -> EksCluster:
    return make_cluster(moto.url, ("use1-az2", "use1-az6"))


def eks_cloud(cluster: EksCluster, proxy: Ec2FaultProxy) -> Cloud:
    def left(home: Path, gang: str) -> list[str]:
        with Store(home) as store:
            prefix = spec.part_name(journal.owner(store), gang + "-")
        return ([g for g in cluster.groups() if g.startswith(gang + "-")]
                + [n for n in proxy.placement_groups(REGION) if n.startswith(prefix)]
                + [t["LaunchTemplateName"] for t in cluster.ec2.describe_launch_templates()["LaunchTemplates"]
                   if t["LaunchTemplateName"].startswith(prefix)])
    return Cloud({**aws_env(proxy.url), ENV_ADMIN_CIDRS: ADMIN_CIDR}, left)


def test_eks_up_killed_at_every_step_leaks_nothing(tmp_path: Path, eks: EksCluster, proxy: Ec2FaultProxy,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "kube").mkdir()
    with MultiCluster(1, names=[eks.name], directory=tmp_path / "kube") as kube:
        spec_file = job(tmp_path / "train.yaml")
        figures = campaign(tmp_path, eks_cloud(eks, proxy), "ku", lambda gang: [
            "up", str(spec_file), "--cluster", eks.name, "--region", REGION, "--kubeconfig", str(kube.kubeconfig),
            "--node-role", NODE_ROLE, "--name", gang, "--join-timeout", "1", "--yes", "-o", "json"],
            None, monkeypatch)
    print(figures)
    # Both zones' groups made and rolled back: the group's steps twice, and the gang's own around them.
    assert figures["step_names"].count("journal.py:intend") == 2, figures["step_names"]


def test_eks_down_killed_at_every_step_leaks_nothing(tmp_path: Path, eks: EksCluster, proxy: Ec2FaultProxy,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def setup(home: Path, gang: str) -> None:
        made = run(home, "provision", "--cluster", eks.name, "--region", REGION, "--node-role", NODE_ROLE,
                   "--gpu", "H100:8", "--nodes", "2", "--name", gang, "--yes", "-o", "json")
        assert made.exit_code == 0, made.output
        assert [g for g in eks.groups() if g.startswith(gang + "-")], "the gang's group exists before down"

    figures = campaign(tmp_path, eks_cloud(eks, proxy), "kd", lambda gang: ["down", gang, "--yes", "-o", "json"],
                       None, monkeypatch, setup=setup)
    print(figures)


# --- GKE ----------------------------------------------------------------------------------------------------------


def gke_cloud(gke: GkeDouble) -> Cloud:
    def left(home: Path, gang: str) -> list[str]:
        return [p for p in gke.pools() if p.rsplit("/", 1)[-1].startswith(gang + "-")]
    return Cloud({"GEOSCHED_GKE_ENDPOINT": gke.endpoint, "GEOSCHED_GCP_PROJECT": PROJECT}, left)


def test_gke_up_killed_at_a_seeded_sample_of_its_steps_leaks_nothing(tmp_path: Path, gke: GkeDouble,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "kube").mkdir()
    with MultiCluster(1, names=[CLUSTER], directory=tmp_path / "kube") as kube:
        spec_file = job(tmp_path / "train.yaml")
        figures = campaign(tmp_path, gke_cloud(gke), "gu", lambda gang: [
            "up", str(spec_file), "--cluster", CLUSTER, "--provider", "gcp", "--region", LOCATION, "--kubeconfig",
            str(kube.kubeconfig), "--name", gang, "--join-timeout", "1", "--yes", "-o", "json"],
            GKE_UP_SAMPLE, monkeypatch)
    print(figures)
    assert figures["step_names"].count("journal.py:intend") == 3, figures["step_names"]  # zones a, b and c


def test_gke_down_killed_at_every_step_leaks_nothing(tmp_path: Path, gke: GkeDouble,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def setup(home: Path, gang: str) -> None:
        made = run(home, "provision", "--cluster", CLUSTER, "--provider", "gcp", "--region", LOCATION,
                   "--gpu", "H100:8", "--nodes", "2", "--name", gang, "--yes", "-o", "json")
        assert made.exit_code == 0, made.output
        assert gke_cloud(gke).left(home, gang), "the gang's pool exists before down"

    figures = campaign(tmp_path, gke_cloud(gke), "gd", lambda gang: ["down", gang, "--yes", "-o", "json"],
                       None, monkeypatch, setup=setup)
    print(figures)
