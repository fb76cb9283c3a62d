"""Kill campaign for multi-file outputs: `geosched gitops render` and `geosched snapshot export` run as the CLI in
a child process and are SIGKILLed at a random moment; then the invariants are checked:

- no mixed set: right after the kill, what a reader gets (geosched.files.writes.reading, which every reader of a set
  goes through) is the whole old output or the whole new one, never a mix; and the reader writes nothing;
- one re-run repairs: after running the same command once more, the output is byte for byte what a clean
  run gives, and no temp file is left anywhere;
- nothing outside the output is touched: every other file of the run's directory (the inputs, a sentinel
  file beside them) keeps its bytes and its modification time, through the kill and the re-run (the store in
  the command's home is its own and not counted).

Half the kills come at a moment drawn over a clean run's duration (measured at the start of the campaign, on
the same machine under the same load); as the writes are the last milliseconds of a run, the other half come
just before a change to the file system drawn from the changes a clean run makes (the child watches its own
changes through Python's audit events and SIGKILLs itself: the code under test runs unchanged). Children come
from a forkserver that has already imported geosched, so a run costs a fork rather than an interpreter start
and most of its time is the command itself. Used by tests/gitops/test_gitops_kill.py and
benchmarks/bench_kill.py.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import re
import shutil
import signal
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geosched.files import writes
from geosched.files.fields import parse_time
from geosched.gitops import render_tree
from geosched.gitops.files import OWNED_PATTERNS
from geosched.store.db import SNAPSHOT_LAYOUT, Store, write_snapshot
from tests.gitops.gitops_support import AT, lab_fleet, tree_args, write_inputs, write_snapshot_files
from tests.handmade import fleet, network
from tests.kill import peak_rss_kib, run_killable

Tree = dict[str, bytes]


@dataclass(frozen=True)
class Scenario:
    name: str
    prepare: Callable[[Path], None]
    """Inputs and the old output, in a fresh directory."""
    argv: Callable[[Path], list[str]]
    """The command, as typed after `geosched`."""
    out: str
    """The output directory, relative to the run's directory."""
    layout: tuple[str, ...]
    """The files the output's set consists of (geosched.files.writes)."""


def _gitops_old(run: Path) -> None:
    write_inputs(run)
    render_tree(run / "jobs", run / "snapshot", run / "clusters.yaml", run / "out", at=parse_time(AT, "at", ""))
    # The new inputs: r1-a's own links are slow, so alpha moves to r1-b (a file written, one removed, the
    # index and its input digests changed).
    write_snapshot_files(run / "snapshot", slow_zone="r1-a")


def _gitops_argv(run: Path) -> list[str]:
    return ["gitops", "render", *tree_args(run, run / "out"), "--at", "2025-03-02T08:00:00Z"]


def _snapshot_old(run: Path, fmt: str) -> None:
    """The old snapshot: the lab's (three zones). The store, what the export writes: the lab without west."""
    write_snapshot_files(run / "snap")
    if fmt == "json":  # and in the other format: the export must also remove these
        shutil.copy(run / "snap" / "fleet.yaml", run / "snap" / "fleet.json")
    lab, _ = lab_fleet()
    east = fleet([n for n in lab.nodes if n.zone.startswith("r1-")])
    write_snapshot(run / "east", east, network(east))
    with Store(run / "home") as store:
        store.import_snapshot(run / "east")


def _export_argv(fmt: str) -> Callable[[Path], list[str]]:
    return lambda run: ["snapshot", "export", str(run / "snap"), "--format", fmt]


SCENARIOS = (
    Scenario("gitops render", _gitops_old, _gitops_argv, "out", OWNED_PATTERNS),
    Scenario("snapshot export yaml", lambda run: _snapshot_old(run, "yaml"), _export_argv("yaml"), "snap",
             SNAPSHOT_LAYOUT),
    Scenario("snapshot export json", lambda run: _snapshot_old(run, "json"), _export_argv("json"), "snap",
             SNAPSHOT_LAYOUT),
)
SENTINEL = "outside/precious.txt"


# An exported network says how old each measurement is at export time: the one byte-level difference two
# exports of one store may have.
AGE = re.compile(rb'("?age_s"?:\s*)[-+0-9.eE]+')


def tree(root: Path, *, temps: bool = True) -> Tree:
    return {p.relative_to(root).as_posix(): AGE.sub(rb"\1*", p.read_bytes()) for p in sorted(root.rglob("*"))
            if p.is_file() and (temps or not p.name.startswith(writes.TMP_PREFIX))}


def seen(root: Path, layout: tuple[str, ...]) -> Tree:
    """The output as a reader sees it (geosched.files.writes.reading): every file of the set, from its staged temp
    file when a killed run committed but had not renamed it yet."""
    with writes.reading(root, layout=layout) as view:
        names = {p.relative_to(root).as_posix() for p in root.rglob("*")
                 if p.is_file() and not p.name.startswith(writes.TMP_PREFIX)}
        names |= {rel for rel, _ in view.journal.write} if view.journal is not None else set()
        found = {rel: view.path(rel) for rel in sorted(names)}
        return {rel: AGE.sub(rb"\1*", path.read_bytes()) for rel, path in found.items() if path is not None}


def outside(run: Path, scenario: Scenario) -> dict[str, tuple[bytes, int]]:
    """Every file of the run's directory but the output and the command's home, with its modification time."""
    mine = (run / scenario.out, run / "home")
    return {p.relative_to(run).as_posix(): (p.read_bytes(), p.lstat().st_mtime_ns) for p in sorted(run.rglob("*"))
            if p.is_file() and not any(m == p or m in p.parents for m in mine)}


def stray(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob(f"{writes.TMP_PREFIX}*"))


def _cli(argv: list[str]) -> None:
    """The command as `geosched ...` would run it (exit status from typer's SystemExit)."""
    from geosched.cli import main as cli

    sys.argv = ["geosched", *argv]
    cli.main()


MUTATIONS = frozenset({"os.rename", "os.remove", "os.mkdir", "os.rmdir", "os.chmod", "os.truncate"})
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _mutates(event: str, args: tuple[Any, ...]) -> bool:
    if event == "open":
        _, mode, flags = args
        return bool(flags & WRITE_FLAGS) or (isinstance(mode, str) and any(c in mode for c in "wax+"))
    return event in MUTATIONS


def child(argv: list[str], home: str, kill_at: int | None, count_file: str | None, stderr_file: str,
          peak_file: str) -> None:
    """Run the command; with `kill_at`, SIGKILL itself as it is about to make its kill_at-th change to the
    file system (seen through Python's audit events, so the code under test runs unchanged); with
    `count_file`, write there how many changes a whole run made. Its stderr goes to `stderr_file` (the
    campaign looks for tracebacks there) and its peak memory (VmHWM, KiB) to `peak_file` as it exits or
    kills itself (the parent reads it before a timed kill)."""
    os.environ["GEOSCHED_HOME"] = home
    err = os.open(stderr_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(err, 2)
    os.close(err)
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115 - fd 2 itself, for the life of the child
    seen = 0

    def peak() -> None:
        Path(peak_file).write_text(str(peak_rss_kib()))

    def hook(event: str, args: tuple[Any, ...]) -> None:
        nonlocal seen
        if _mutates(event, args):
            seen += 1
            if seen == kill_at:
                peak()
                os.kill(os.getpid(), signal.SIGKILL)

    sys.addaudithook(hook)
    try:
        _cli(argv)
    finally:
        kill_at = None
        peak()
        if count_file is not None:
            Path(count_file).write_text(str(seen))


@dataclass
class Baseline:
    scenario: Scenario
    old: Tree
    new: Tree
    template: Path
    seconds: float
    """A clean run, fork to exit."""
    changes: int
    """Changes a clean run makes to the file system (files opened for writing, renames, removals, mkdirs)."""

    def kill(self, rng: random.Random) -> tuple[float | None, int | None]:
        """Half the kills land at a random moment of the run, half just before a random one of its changes
        (time alone mostly lands before the writes: they are the last few milliseconds of a run)."""
        if rng.random() < 0.5:
            return rng.uniform(0.0, self.seconds * 1.2), None
        return None, rng.randint(1, self.changes)


@dataclass
class Outcome:
    scenario: str
    delay_s: float | None
    kill_at: int | None
    killed: bool
    state: str
    """After the kill, before any reader: old | new | pending (a set cut in the middle) | mixed (a failure)."""
    temps_after_kill: int
    reader_saw: str
    """old | new | mixed (a failure)."""
    reader_wrote: bool
    rerun_ok: bool
    stray: list[str]
    touched_outside: list[str]
    """Files outside the output whose bytes or modification time changed, or that appeared or went."""
    tracebacks: int = 0
    """Runs (the killed one, the re-run) whose stderr holds a Python traceback."""
    hangs: int = 0
    """Runs still going at the limit (a clean run's time x HANG_FACTOR, at least HANG_FLOOR_S)."""
    peak_kib: int = 0
    """The larger peak resident set of the two runs (VmHWM)."""

    @property
    def clean(self) -> bool:
        return (self.state != "mixed" and self.reader_saw != "mixed" and not self.reader_wrote and self.rerun_ok
                and not self.stray and not self.touched_outside and not self.tracebacks and not self.hangs)


# A run that takes this many times a clean run (measured in the same campaign), and at least the floor, hangs.
HANG_FACTOR, HANG_FLOOR_S = 20.0, 30.0


@dataclass(frozen=True)
class Spawned:
    killed: bool
    exitcode: int | None
    hung: bool
    traceback: bool
    peak_kib: int


def _spawn(mp: Any, scenario: Scenario, run: Path, delay_s: float | None = None, kill_at: int | None = None,
           count_file: Path | None = None, limit_s: float = 120.0, target: Callable[..., None] = child) -> Spawned:
    """`target` (the command, `child`) in a forked child; what it left: killed, exit code, hung, traceback, peak."""
    err, peak = run / "child.stderr", run / "child.peak"
    peak.write_text("0")
    proc = mp.Process(target=target, args=(scenario.argv(run), str(run / "home"), kill_at,
                                          str(count_file) if count_file else None, str(err), str(peak)))
    timed: list[int] = []
    started = time.monotonic()
    killed = run_killable(proc, delay_s, limit_s, before_kill=lambda pid: timed.append(peak_rss_kib(pid)))
    # Still running at the limit: run_killable waited `limit_s` after the planned kill (or from the start).
    hung = time.monotonic() - started >= limit_s + (delay_s or 0.0)
    text = err.read_text(errors="replace") if err.exists() else ""
    kib = max([int(peak.read_text() or 0), *timed])
    err.unlink(missing_ok=True)
    peak.unlink()
    return Spawned(killed or proc.exitcode == -signal.SIGKILL, proc.exitcode, hung,
                   "Traceback (most recent call last)" in text, kib)


def baseline(mp: Any, scenario: Scenario, workdir: Path) -> Baseline:
    slug = scenario.name.replace(" ", "-")
    template = workdir / f"template-{slug}"
    template.mkdir(parents=True)
    scenario.prepare(template)
    (template / SENTINEL).parent.mkdir()
    (template / SENTINEL).write_text("the user's data\n")
    old = tree(template / scenario.out)
    runs: list[tuple[float, int]] = []
    new = None
    for i in range(3):
        run = workdir / f"clean-{slug}-{i}"
        shutil.copytree(template, run, symlinks=True)
        started = time.monotonic()
        spawned = _spawn(mp, scenario, run, count_file=workdir / "count")
        runs.append((time.monotonic() - started, int((workdir / "count").read_text())))
        assert spawned.exitcode == 0, f"{scenario.name}: a clean run failed ({spawned.exitcode})"
        new = tree(run / scenario.out)
        shutil.rmtree(run)
    assert new is not None and new != old
    return Baseline(scenario, old, new, template, statistics.median(t for t, _ in runs), max(n for _, n in runs))


def _which(t: Tree, base: Baseline) -> str:
    return "old" if t == base.old else "new" if t == base.new else "mixed"


def run_one(mp: Any, base: Baseline, workdir: Path, index: int, rng: random.Random) -> Outcome:
    run = workdir / f"run-{index:04d}"
    shutil.copytree(base.template, run, symlinks=True)
    out = run / base.scenario.out
    before = outside(run, base.scenario)
    delay, kill_at = base.kill(rng)
    limit = max(HANG_FLOOR_S, base.seconds * HANG_FACTOR)
    first = _spawn(mp, base.scenario, run, delay, kill_at, limit_s=limit)
    temps = len(stray(run))
    state = "pending" if writes.pending(out) else _which(tree(out, temps=False), base)
    on_disk = tree(out)
    reader_saw = _which(seen(out, base.scenario.layout), base)
    reader_wrote = tree(out) != on_disk
    rerun = _spawn(mp, base.scenario, run, None, limit_s=limit)
    after = outside(run, base.scenario)
    touched = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    outcome = Outcome(base.scenario.name, delay, kill_at, first.killed, state, temps, reader_saw, reader_wrote,
                      rerun.exitcode == 0 and tree(out) == base.new, stray(run), touched,
                      tracebacks=first.traceback + rerun.traceback, hangs=first.hung + rerun.hung,
                      peak_kib=max(first.peak_kib, rerun.peak_kib))
    shutil.rmtree(run)
    return outcome


def campaign(runs: int, seed: int, workdir: Path) -> list[Outcome]:
    mp = multiprocessing.get_context("forkserver")
    mp.set_forkserver_preload(["geosched.cli.main", "tests.gitops.killcampaign"])
    rng = random.Random(seed)
    bases = [baseline(mp, s, workdir) for s in SCENARIOS]
    for b in bases:
        print(f"{b.scenario.name}: a clean run takes {b.seconds:.3f} s and makes {b.changes} changes",
              file=sys.stderr)
    return [run_one(mp, bases[i % len(bases)], workdir, i, rng) for i in range(runs)]


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    return {
        "runs": len(outcomes),
        "killed": sum(o.killed for o in outcomes),
        "states_after_kill": dict(Counter(o.state for o in outcomes)),
        "runs_with_temp_files_after_kill": sum(o.temps_after_kill > 0 for o in outcomes),
        "mixed_seen_by_reader": sum(o.reader_saw == "mixed" for o in outcomes),
        "readers_that_wrote": sum(o.reader_wrote for o in outcomes),
        "files_touched_outside_the_output": sum(len(o.touched_outside) for o in outcomes),
        "rerun_not_clean": sum(not o.rerun_ok for o in outcomes),
        "stray_files": sum(len(o.stray) for o in outcomes),
        "tracebacks": sum(o.tracebacks for o in outcomes),
        "hangs": sum(o.hangs for o in outcomes),
        "peak_rss_mib": round(max((o.peak_kib for o in outcomes), default=0) / 1024, 1),
        "by_scenario": dict(Counter(o.scenario for o in outcomes)),
    }
