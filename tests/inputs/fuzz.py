"""Hostile inputs of every kind the CLI reads, and the command that reads each: one generator serves the CI
fuzz suite (hypothesis draws the `random.Random`) and the 10,000-input benchmark (a seeded one).

A case starts from a real, valid file of its kind (the test data and the examples) and then, by chance:

- changes one value inside the parsed document to something hostile (a huge or negative integer, 1e308,
  .inf/.nan, a list where a string goes, a name holding rich markup or escape sequences, a long string, a
  deep list) and writes it back as YAML or JSON;
- damages the text (bytes flipped, cut, repeated; YAML syntax such as anchors, aliases, tags and merge
  keys dropped in; NUL bytes, invalid UTF-8, a BOM);
- replaces it wholesale with a known attack: alias bombs (sequences and merge keys), self-reference,
  nesting thousands deep in YAML and JSON, a CSV field over 128 KiB, a huge number;
- mutates it structurally with tests/inputs/mutate.py, a second generator that works on the YAML node graph
  (keys given twice, types swapped, alias bombs made of the file's own nodes, tags, deep nesting, unicode,
  truncation): the real files being the example GitOps repository (the `repo` kind mutates one file of a copy
  of it and runs `gitops check` as its CI workflow does), the example jobs, real EKS and GKE kubeconfigs and
  journals of killed writes;
- or hands a FIFO, /dev/zero or a directory instead of a file.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import logging
import os
import random
import re
import shutil
import signal
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.inputs.inputs_support import ROOT, Run, in_process
from tests.inputs.mutate import structural

DATA = ROOT / "tests" / "data"
GOOD = DATA / "good"
AT = "2025-03-01T12:00:00Z"
HANG_S = 10.0
EXAMPLE_REPO = ROOT / "examples" / "gitops"
KUBECONFIGS = DATA / "kubeconfigs"
# Planted in every kubeconfig seed as a user's token: no output may carry it while it is still one.
CANARY = "CANARY-fuzz-0c1e2d3f4a5b6c7d"


@dataclass(frozen=True)
class Kind:
    name: str
    seeds: tuple[Path, ...]
    args: Callable[[Path, Path], list[str | Path]]
    """(fuzzed file, work dir) -> the command's arguments."""
    suffix: str = ".yaml"
    results: tuple[int, ...] = (0, 3)
    """Exit codes that are answers (done, no fit)."""
    failures: tuple[int, ...] = (2,)
    """Exit codes that must come with one `error:` line (exit 0 and 3 are results)."""
    plant: Callable[[str], str] | None = None
    """What is done to a seed's text before it is mutated."""
    at: Callable[[Path, Path], Path] | None = None
    """(seed, work dir) -> where the fuzzed file is written (default: work/input{suffix})."""
    env: Callable[[Path], dict[str, str]] | None = None
    """(work dir) -> environment variables the command runs with."""


def _render(work: Path, *, jobs: Path | None = None, clusters: Path | None = None,
            config: Path | None = None, snapshot: Path | None = None) -> list[str | Path]:
    lab = work / "lab"
    extra: list[str | Path] = ["--config", config] if config is not None else []
    return ["gitops", "render", "--jobs", jobs or lab / "jobs", "--snapshot", snapshot or lab / "snapshot",
            "--clusters", clusters or lab / "clusters.yaml", "--out", work / "out", "--at", str(AT), *extra]


def _jobs_dir(path: Path, work: Path) -> Path:
    """A jobs directory holding the fuzzed job (gitops render reads a directory of job specs)."""
    jobs = work / "fuzz-jobs"
    jobs.mkdir(exist_ok=True)
    link = jobs / "job.yaml"
    with contextlib.suppress(FileNotFoundError):
        link.unlink()
    link.symlink_to(path)  # the fuzzed path itself, special files included
    return jobs


def _snapshot_dir(path: Path, work: Path, role: str) -> Path:
    snap = work / "fuzz-snapshot"
    snap.mkdir(exist_ok=True)
    for name in ("fleet.yaml", "network.yaml"):
        target = snap / name
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        target.symlink_to(path if name.startswith(role) else work / "lab" / "snapshot" / name)
    return snap


def _journal(path: Path, work: Path) -> list[str | Path]:
    """The fuzzed journal where a killed render or a killed export leaves its own, half the cases each (by the
    file's checksum): in a copy of the lab's rendered tree for `gitops render`, which recovers it first (a
    writer), or in a copy of the lab's snapshot for `place --snapshot`, which reads through it (a reader). A
    special file is planted as a link to it (refused as a link, never opened)."""
    from geosched.files.writes import JOURNAL

    data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    if data is not None and zlib.crc32(data) % 2:
        snapshot = work / "fuzz-journal-snapshot"
        shutil.rmtree(snapshot, ignore_errors=True)
        shutil.copytree(work / "lab" / "snapshot", snapshot)
        (snapshot / JOURNAL).write_bytes(data)
        return ["place", GOOD / "job.yaml", "--snapshot", snapshot, "-o", "json"]
    tree = work / "lab-tree"
    if not tree.is_dir():
        _render_lab(tree)
    shutil.copytree(tree, work / "out", symlinks=True)
    if data is None:
        (work / "out" / JOURNAL).symlink_to(path)
    else:
        (work / "out" / JOURNAL).write_bytes(data)
    return _render(work)


def _render_lab(tree: Path) -> None:
    from geosched.files.fields import parse_time
    from geosched.gitops import render_tree

    lab = tree.parent / "lab"
    render_tree(lab / "jobs", lab / "snapshot", lab / "clusters.yaml", tree, at=parse_time(AT, "at", ""))


def _plant_canaries(text: str) -> str:
    """The seed with the canary as each user's token (beside the exec plugin: client-go allows both) and in
    each cluster's CA data (base64, as the field is), put in as text so that the rest of the real file stays
    byte for byte what the cloud's CLI wrote."""
    ca = base64.b64encode(f"{CANARY}-ca".encode()).decode()
    text = text.replace("\n  user:\n", f"\n  user:\n    token: {CANARY}-token\n")
    return re.sub(r"(certificate-authority-data: ).*", lambda m: m.group(1) + CANARY + "-" + ca, text)


def _no_plugins(work: Path) -> dict[str, str]:
    """An empty PATH directory: the seeds' exec plugins (aws, gke-gcloud-auth-plugin) and whatever a mutation
    makes of their names are not found, rather than run by the fuzz suite."""
    empty = work / "no-bin"
    empty.mkdir(exist_ok=True)
    return {"PATH": str(empty)}


def _in_repo(seed: Path, work: Path) -> Path:
    """A fresh copy of the example repository, the fuzzed file to be written over the seed's copy."""
    repo = work / "repo"
    shutil.rmtree(repo, ignore_errors=True)
    shutil.copytree(EXAMPLE_REPO, repo, symlinks=True)
    return repo / seed.relative_to(EXAMPLE_REPO)


def _repo_check(_fuzzed: Path, work: Path) -> list[str | Path]:
    """`gitops check` as the example's CI workflow runs it on a pull request
    (examples/gitops/.github/workflows/geosched.yaml)."""
    repo = work / "repo"
    return ["gitops", "check", "--jobs", repo / "jobs", "--snapshot", repo / "snapshot", "--clusters",
            repo / "clusters.yaml", "--config", repo / "gitops.yaml", "--out", repo]


REPO_FILES = tuple(sorted(p for p in EXAMPLE_REPO.rglob("*.yaml") if ".github" not in p.parts))
TRACES = tuple(sorted((DATA / "traces").iterdir()))
KINDS: tuple[Kind, ...] = (
    Kind("job", (GOOD / "job.yaml", *sorted((ROOT / "examples" / "jobs").glob("*.yaml"))),
         lambda f, w: ["place", f, "--fleet", GOOD / "fleet.yaml", "--network", GOOD / "network.yaml", "-o", "json"]),
    Kind("kube-job", tuple(sorted((ROOT / "examples" / "gitops" / "jobs").rglob("*.yaml"))),
         lambda f, w: _render(w, jobs=_jobs_dir(f, w))),
    Kind("fleet", (GOOD / "fleet.yaml", EXAMPLE_REPO / "snapshot" / "fleet.yaml"),
         lambda f, w: ["place", GOOD / "job.yaml", "--fleet", f, "-o", "json"]),
    Kind("network", (GOOD / "network.yaml", EXAMPLE_REPO / "snapshot" / "network.yaml"),
         lambda f, w: ["place", GOOD / "job.yaml", "--fleet", GOOD / "fleet.yaml", "--network", f, "--explain"]),
    Kind("snapshot", (GOOD / "fleet.yaml",), lambda f, w: _render(w, snapshot=_snapshot_dir(f, w, "fleet"))),
    Kind("inventory", (GOOD / "inventory.yaml",),
         lambda f, w: ["probe", "show", "--inventory", f, "-o", "json"]),
    Kind("trace", TRACES, lambda f, w: ["simulate", "--trace", f, "--fleet", GOOD / "fleet.yaml", "-o", "json"],
         suffix=".trace"),
    Kind("clusters", (ROOT / "examples" / "gitops" / "clusters.yaml",), lambda f, w: _render(w, clusters=f)),
    Kind("gitops-config", (ROOT / "examples" / "gitops" / "gitops.yaml",), lambda f, w: _render(w, config=f)),
    Kind("terraform", (DATA / "terraform" / "output.json",),
         lambda f, w: ["provision", "--gpu", "A100:8", "--nodes", "1", "--tf-output", f, "--dry-run"], suffix=".json"),
    Kind("carbon", (GOOD / "carbon.csv",),
         lambda f, w: ["report", "carbon", "--carbon", f, "-o", "json"], suffix=".csv"),
    Kind("journal", tuple(sorted((DATA / "journals").glob("*.journal"))), _journal, suffix=".json"),
    # `jobs` reads the kubeconfig through the gate, then dials its server (127.0.0.1:1: refused at once).
    Kind("kubeconfig", tuple(sorted(KUBECONFIGS.glob("*.yaml"))),
         lambda f, w: ["jobs", "--kubeconfig", f, "-o", "json"], results=(0,), failures=(1, 2), plant=_plant_canaries,
         env=_no_plugins),
    # Exit 1 with a diff is `check`'s answer to a tree that is not what its inputs render to.
    Kind("repo", REPO_FILES, _repo_check, results=(0, 1, 3), at=_in_repo),
)
BY_NAME = {k.name: k for k in KINDS}


def prepare(work: Path) -> None:
    """The work directory's fixed inputs: the gitops tests' lab repository (jobs, snapshot, clusters)."""
    from tests.gitops.gitops_support import write_inputs  # the gitops tests' lab repository

    write_inputs(work / "lab")
    (work / "home").mkdir(mode=0o700, exist_ok=True)


# --- hostile values and texts ----------------------------------------------------------------------

MARKUP_NAMES = ["x[/bold]", "[link=https://evil.example]x[/link]", "e\x1b]8;;https://evil.example\x07v",
                "\x1b[2J\x1b[H", "[bold red]", "a\nb", "\u202ereversed", "../../etc/passwd", ".", ""]


def hostile_value(rng: random.Random) -> Any:
    choices: list[Callable[[], Any]] = [
        lambda: 2**63, lambda: -(2**63), lambda: 10 ** rng.randint(10, 1000), lambda: -1, lambda: 0,
        lambda: 1e308, lambda: -1e308, lambda: float("inf"), lambda: float("nan"), lambda: 5e-324,
        lambda: rng.choice(MARKUP_NAMES), lambda: "x" * rng.choice([64, 300, 70_000]),
        lambda: [], lambda: {}, lambda: None, lambda: True, lambda: ["Job"], lambda: {"a": [1, {"b": None}]},
        lambda: _nested(rng.randint(50, 200)), lambda: "1e308", lambda: "2017-10-07 01:00:00",
        lambda: rng.randint(-10, 10**6), lambda: rng.random() * 10**rng.randint(0, 20),
    ]
    return rng.choice(choices)()


def hostile_like(rng: random.Random, value: Any) -> Any:
    """A hostile value of `value`'s own type, so the parsers accept it and it travels on to the policies,
    the simulator and the printers."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return rng.choice([0, 1, 2**31 - 1, 2**31, 2**53 + 1, 2**63, 10**12, value * 1000, -value])
    if isinstance(value, float):
        return rng.choice([0.0, 5e-324, 1e-9, 1e12, 1e12 + 1, 1e15, 1e300, value * 1e6, -value])
    if isinstance(value, str):
        return rng.choice([*MARKUP_NAMES, value + rng.choice(MARKUP_NAMES), value * 50])
    if isinstance(value, list) and value:
        return [hostile_like(rng, v) for v in value]
    return hostile_value(rng)


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


def bomb(rng: random.Random) -> str:
    width, levels = rng.randint(5, 12), rng.randint(6, 12)
    if rng.random() < 0.5:
        lines = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
        lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    else:  # merge keys: each level merges the previous one `width` times
        lines = ["a0: &a0 {k: v}"]
        lines += [f"a{i}: &a{i} {{<<: [{', '.join([f'*a{i - 1}'] * width)}], k{i}: v}}" for i in range(1, levels)]
    return "name: bomb\nworkers: 1\ngpus_per_worker: 1\nlabels:\n" + "\n".join("  " + x for x in lines) + "\n"


def attack(rng: random.Random, kind: Kind) -> str | bytes:
    depth = rng.choice([100, 1_000, 10_000, 200_000])
    attacks: list[Callable[[], str | bytes]] = [
        lambda: bomb(rng),
        lambda: "a: &a [*a]\n",
        lambda: "[" * depth + "]" * depth,
        lambda: '{"a":' * depth + "1" + "}" * depth,
        lambda: "- " * depth + "x\n",
        lambda: "submit_time,gpus,duration,model\n0,8,60," + "m" * (200 << 10) + "\n",
        lambda: '0,8,60,"' + "unterminated\n" * 20_000,
        lambda: "workers: " + "9" * 5000 + "\n",
        lambda: b"\xff\xfe" + "name: x\n".encode("utf-16-le"),
        lambda: b"\x00" * rng.randint(1, 4096),
        lambda: "\ufeff" + _seed_text(rng, kind),
        lambda: "!!python/object/apply:os.system ['true']\n",
        lambda: "x: !!binary |\n  " + "A" * 4096 + "\n",
        lambda: "? [a, b]\n: c\n",
        lambda: "---\n" * rng.randint(2, 2000),
        lambda: "",
    ]
    return rng.choice(attacks)()


def _seed_text(rng: random.Random, kind: Kind, seed: Path | None = None) -> str:
    text = (seed or rng.choice(kind.seeds)).read_text(encoding="utf-8")
    return kind.plant(text) if kind.plant else text


def mutate_document(rng: random.Random, text: str, as_json: bool) -> str | None:
    """One value deep inside the parsed document replaced (or a key dropped or added); None when the text is
    not a YAML/JSON document."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if not isinstance(doc, dict | list):
        return None
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        _mutate_in(rng, doc)
    try:
        if as_json:
            return json.dumps(doc, default=str)
        return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    except (ValueError, RecursionError, yaml.YAMLError):
        return None


def _mutate_in(rng: random.Random, doc: Any) -> None:
    parent, key = _random_slot(rng, doc)
    if parent is None:
        return
    action = rng.random()
    if isinstance(parent, dict) and action < 0.15:
        parent.pop(key, None)
    elif isinstance(parent, dict) and action < 0.25:
        parent[rng.choice(["unknown", "kind", "apiVersion", "name", "nodes", "zones", "value"])] = hostile_value(rng)
    elif isinstance(parent, list) and action < 0.35 and parent:
        parent.append(copy.deepcopy(parent[rng.randrange(len(parent))]))  # a duplicate entry
    elif rng.random() < 0.6:
        parent[key] = hostile_like(rng, parent[key])  # same type: the document stays valid more often
    else:
        parent[key] = hostile_value(rng)


def _random_slot(rng: random.Random, doc: Any) -> tuple[Any, Any]:
    parent: Any = None
    key: Any = None
    here = doc
    for _ in range(rng.randint(1, 12)):
        if isinstance(here, dict) and here:
            parent, key = here, rng.choice(list(here))
        elif isinstance(here, list) and here:
            parent, key = here, rng.randrange(len(here))
        else:
            break
        here = parent[key]
        if rng.random() < 0.25:
            break
    return parent, key


SNIPPETS = ["&a ", "*a", "*nope", "<<: *a\n", "!!str ", "!!int ", "!!float ", "!!timestamp ", "!!set ", "? ",
            "[", "]", "{", "}", ",", ":", "- ", "\t", "\x00", "\x1b[31m", "'", '"', "#", "%YAML 1.1\n", "---\n",
            "...\n", "\ud7ff", "1e308", "-0", ".nan", ".inf", "0x7fffffffffffffff", "\n" * 3, "|\n", ">\n"]


def damage_text(rng: random.Random, text: str) -> str | bytes:
    data = bytearray(text.encode("utf-8", "surrogatepass"))
    for _ in range(rng.randint(1, 8)):
        if not data:
            break
        at = rng.randrange(len(data))
        action = rng.random()
        if action < 0.25:
            data[at] = rng.randrange(256)
        elif action < 0.5:
            snippet = rng.choice(SNIPPETS).encode("utf-8", "surrogatepass")
            data[at:at] = snippet
        elif action < 0.65:
            del data[at:at + rng.randint(1, 64)]
        elif action < 0.75:
            del data[at:]
        else:
            end = min(len(data), at + rng.randint(1, 200))
            data[at:at] = data[at:end] * rng.randint(1, 50)
    return bytes(data)


def damage_csv(rng: random.Random, text: str) -> str:
    lines = text.splitlines()
    for _ in range(rng.randint(1, 4)):
        row = rng.randrange(len(lines)) if lines else 0
        cells = lines[row].split(",") if lines else [""]
        cells[rng.randrange(len(cells))] = rng.choice(
            ["1e308", "-1e308", "nan", "inf", "-0", "9" * 5000, "", '"', "0x10", "1_000", "½", "٣",
             "2017-10-07 01:00:00", "x[/bold]", "\x1b[2J", str(2**63), "1e-320", " 8 "])
        if lines:
            lines[row] = ",".join(cells)
    return "\n".join(lines) + "\n"


def fuzz_input(rng: random.Random, kind: Kind, seed: Path | None = None, *, structural_only: bool = False
               ) -> str | bytes:
    """One hostile input of `kind` (from `seed` when given); with `structural_only`, always a structural
    mutation of a real file (mutate.py) unless the file is not YAML or JSON."""
    roll = 0.5 if structural_only else rng.random()
    if roll < 0.12:
        return attack(rng, kind)
    text = _seed_text(rng, kind, seed)
    as_json = kind.suffix == ".json" or text.lstrip()[:1] in "[{"
    csv = kind.suffix == ".csv" or text.lstrip()[:1].isdigit()
    if roll < 0.42:
        mutated = damage_csv(rng, text) if csv else mutate_document(rng, text, as_json=as_json)
        if mutated is not None:
            return mutated
    elif roll < 0.77 and not csv and (structured := structural(rng, text, as_json=as_json)) is not None:
        return structured
    return damage_text(rng, text)


# --- running one case ------------------------------------------------------------------------------

SPECIAL = ("fifo", "/dev/zero", "directory")


@dataclass(frozen=True)
class Outcome:
    kind: str
    args: list[str]
    run: Run
    seconds: float
    hang: bool
    leaked: bool = False
    """A credential of the input (the planted canary, still a credential) in the output."""

    @property
    def ok(self) -> bool:
        """An answer (success, no fit, ...) or a one-line error; never a traceback, a hang or a credential."""
        if self.hang or self.run.traceback or self.leaked:
            return False
        kind = BY_NAME[self.kind]
        return self.run.code in kind.results or (self.run.code in kind.failures and one_error_line(self.run))


LOG_RECORD = ("DEBUG:", "INFO:", "WARNING:", "ERROR:", "CRITICAL:")


def one_error_line(run: Run) -> bool:
    """One `error:` line, the last; before it at most the log records of a library (the Kubernetes client logs
    a failed exec plugin and urllib3 its retries, on the root logger's default handler)."""
    lines = run.stderr.rstrip("\n").split("\n")
    return (lines[-1].startswith("error: ") and sum(line.startswith("error: ") for line in lines) == 1
            and all(line.startswith(LOG_RECORD) or line.startswith(" ") for line in lines[:-1]))


class Hang(BaseException):
    """Raised by the alarm in the middle of whatever the command was doing (a BaseException, so no `except
    Exception` in the code under test swallows it)."""


@contextlib.contextmanager
def alarm(seconds: float) -> Iterator[None]:
    def ring(_signum: int, _frame: object) -> None:
        raise Hang()

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def input_path(rng: random.Random, kind: Kind, work: Path, *, structural_only: bool = False) -> Path:
    """The fuzzed file (or, now and then, a special file in its place)."""
    seed = rng.choice(kind.seeds)
    if rng.random() < 0.03 and not structural_only:
        special = rng.choice(SPECIAL)
        if kind.at:  # in place of the seed's file, where the command looks for it
            path = kind.at(seed, work)
            path.unlink()
            if special == "fifo":
                os.mkfifo(path)
            elif special == "directory":
                path.mkdir()
            else:
                path.symlink_to(special)
            return path
        if special == "fifo":
            path = work / f"fifo{kind.suffix}"
            if not path.exists():
                os.mkfifo(path)
            return path
        if special == "directory":
            path = work / f"dir{kind.suffix}"
            path.mkdir(exist_ok=True)
            return path
        return Path(special)
    path = kind.at(seed, work) if kind.at else work / f"input{kind.suffix}"
    content = fuzz_input(rng, kind, seed, structural_only=structural_only)
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
    return path


def leaked(path: Path, run: Run) -> bool:
    """Whether the output holds a credential of the input that carries the canary. A file the gate refuses
    was never parsed, so no canary may show at all; in one it reads, the canary counts while it is (part of)
    a credential, not after a mutation made it a name."""
    from geosched.core.errors import InputError
    from geosched.files.gate import parse_yaml
    from geosched.kube.kubeconfig import credentials

    output = run.stdout + run.stderr
    if CANARY not in output:
        return False
    try:
        document = parse_yaml(path.read_bytes().decode("utf-8"), str(path))
    except (InputError, UnicodeDecodeError, OSError):
        return True
    return any(secret in output for secret in credentials(document) if CANARY in secret)


def _fresh_process() -> None:
    """What a new `python -m geosched` starts without: no credential registered for redaction by an earlier
    case (it would hide this case's leak), no log handler bound to an earlier case's captured stderr."""
    from geosched.console import redact

    redact._secrets = frozenset()  # the process-wide registry, empty as in a new process
    logging.root.handlers.clear()


def run_case(rng: random.Random, kind: Kind, work: Path,
             runner: Callable[[list[str | Path], Path, dict[str, str]], Run] | None = None, *,
             structural_only: bool = False) -> Outcome:
    """Generate one input of `kind`, run its command (in-process unless `runner` says otherwise) with a fresh
    home and output directory, and report how it ended."""
    path = input_path(rng, kind, work, structural_only=structural_only)
    for scratch in ("out", "home"):
        shutil.rmtree(work / scratch, ignore_errors=True)
    (work / "home").mkdir(mode=0o700)  # as geosched makes it: a looser one gets a note
    args = kind.args(path, work)
    env = kind.env(work) if kind.env else {}
    started = time.monotonic()
    hang = False
    if runner is not None:
        run = runner(args, work / "home", env)
    else:
        _fresh_process()
        try:
            with alarm(HANG_S):
                run = in_process(args, work / "home", env)
        except Hang:
            hang = True
            run = Run("hang", "", "")
    return Outcome(kind.name, [str(a) for a in args], run, time.monotonic() - started, hang,
                   kind.plant is not None and leaked(path, run))
