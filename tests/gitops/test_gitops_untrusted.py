"""A GitOps repository is whatever a pull request put there: the commands that read it (`gitops check`,
`place --snapshot`, `snapshot import`) never write, and the ones that write (`gitops render`,
`snapshot export`) touch nothing outside the tree, whatever journal or temp file the repository holds
(issue 19, item 1; docs/security.md). Real processes, real files; the victim lives outside the repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gitops_support import AT, ROOT, git, init_repo, tree_args

from geosched.files.writes import JOURNAL, TMP_PREFIX, temp_name
from tests.inputs.inputs_support import geosched as inputs_geosched
from tests.inputs.inputs_support import in_process

pytestmark = pytest.mark.integration


def geosched(*args: str | Path, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "geosched", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={**os.environ, "GEOSCHED_HOME": str(home), "COLUMNS": "200"})


def listing(root: Path) -> dict[str, bytes | str]:
    """Every entry below `root` with its bytes (a link: where it points): what a command may not change."""
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if ".git/" in f"{rel}/":
            continue
        out[rel] = f"-> {os.readlink(path)}" if path.is_symlink() else path.read_bytes() if path.is_file() else "dir"
    return out


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A rendered, committed repository (tree at its root), and a victim file outside it."""
    path = tmp_path / "repo"
    init_repo(path)
    run = geosched("gitops", "render", *tree_args(path), "--at", AT, home=tmp_path / "home")
    assert run.returncode == 0, run.stderr
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "render")
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "precious.txt").write_text("the user's data\n")
    return path


READERS = {
    "gitops check": lambda repo: ["gitops", "check", *tree_args(repo)],
    "place --snapshot": lambda repo: ["place", str(ROOT / "tests" / "data" / "good" / "job.yaml"),
                                      "--snapshot", str(repo / "snapshot"), "-o", "json"],
}


def planted(victim: Path, state: str) -> dict[str, object]:
    """The issue's journal: a temp name that is an absolute path out of the tree."""
    return {"state": state, "write": [["fleet.yaml", str(victim)]], "remove": []}


@pytest.mark.parametrize("state", ["staging", "commit"])
@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_journal_planted_in_the_snapshot_touches_nothing(repo: Path, reader: str, state: str) -> None:
    """Before the fix: `staging` deleted the victim, `commit` moved it into snapshot/ (exit 0 both)."""
    victim = repo.parent / "victim" / "precious.txt"
    (repo / "snapshot" / JOURNAL).write_text(json.dumps(planted(victim, state)))
    before, outside = listing(repo), listing(victim.parent)
    run = geosched(*READERS[reader](repo), home=repo.parent / "home")
    assert listing(victim.parent) == outside and victim.read_text() == "the user's data\n"
    assert listing(repo) == before, "a reader wrote into the repository"
    assert run.returncode == 2, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert str(repo / "snapshot" / JOURNAL) in lines[0] and "not a journal geosched wrote" in lines[0], lines


@pytest.mark.parametrize("state", ["staging", "commit"])
def test_a_writer_refuses_a_planted_journal_and_touches_nothing(repo: Path, state: str) -> None:
    """`gitops render` and `snapshot export` recover their own output directory first: a journal there whose
    names geosched cannot have made is foreign, reported, and left alone with everything else."""
    victim = repo.parent / "victim" / "precious.txt"
    journal = {"state": state, "write": [["placements.yaml", str(victim)]], "remove": ["../victim/precious.txt"]}
    (repo / JOURNAL).write_text(json.dumps(journal))
    before, outside = listing(repo), listing(victim.parent)
    run = geosched("gitops", "render", *tree_args(repo), "--at", AT, home=repo.parent / "home")
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "not a journal geosched wrote" in run.stderr and "Traceback" not in run.stderr
    assert listing(victim.parent) == outside and listing(repo) == before


TEMP = f"{TMP_PREFIX}fleet.yaml.1.0a1b2c3d"
MALFORMED = {
    "not json": "{",
    "a list": "[]",
    "absolute target": json.dumps({"state": "commit", "write": [["/etc/fleet.yaml", TEMP]], "remove": []}),
    "dotdot target": json.dumps({"state": "commit", "write": [["../fleet.yaml", TEMP]], "remove": []}),
    "temp of another name": json.dumps({"state": "commit", "write": [["fleet.yaml", f"{TMP_PREFIX}x.yaml.1.0a1b2c3d"]],
                                        "remove": []}),
    "temp with a separator": json.dumps({"state": "staging", "write": [["fleet.yaml", f"sub/{TEMP}"]], "remove": []}),
    "remove out of the tree": json.dumps({"state": "commit", "write": [], "remove": ["/tmp/x"]}),
    # Inside the tree but not a file of the set: the pull request's job specs, Git's own metadata.
    "a job spec": json.dumps({"state": "commit", "write": [], "remove": ["jobs/alpha.yaml"]}),
    "git metadata": json.dumps({"state": "commit", "write": [], "remove": [".git/config"]}),
    "git metadata, any case": json.dumps({"state": "commit", "write": [], "remove": ["clusters/.GIT/x/y.yaml"]}),
    "unknown state": json.dumps({"state": "done", "write": [], "remove": []}),
    "a number for a name": json.dumps({"state": "commit", "write": [[1, 2]], "remove": []}),
    "nul in a name": json.dumps({"state": "commit", "write": [], "remove": ["a\u0000b"]}),
    "huge": "[" * 100_000 + "]" * 100_000,
    "binary": "\udcff\udcfe",
}


def test_a_malformed_journal_is_one_line_exit_2_and_nothing_is_touched(repo: Path) -> None:
    """Before the fix: a traceback for most (a list, a number, bytes), and the others acted on. In-process
    (the same `main` as `python -m geosched`), a dozen cases in a second."""
    for case, text in MALFORMED.items():
        for where, command in (("snapshot", READERS["place --snapshot"](repo)),
                               ("", ["gitops", "render", *tree_args(repo), "--at", AT])):
            journal = repo / where / JOURNAL
            journal.write_bytes(text.encode("utf-8", "surrogateescape"))
            before = listing(repo)
            run = in_process(command, repo.parent / "home")
            assert run.one_line_error and str(journal) in run.stderr, (case, where, run.code, run.stderr)
            assert listing(repo) == before, (case, where)
            journal.unlink()


def test_a_reader_reads_an_interrupted_export_consistently_and_leaves_it_for_a_writer(repo: Path) -> None:
    """A journal geosched could have written (names of its own pattern, inside the directory): before its
    commit point the reader sees the old set, after it the new one (staged temp files for names not yet
    renamed), and in both cases the directory is left as it is; the next export finishes it."""
    snap = repo / "snapshot"
    fleet = (snap / "fleet.yaml").read_text()
    tmp = f"{TMP_PREFIX}fleet.yaml.{2**22 + 7}.0a1b2c3d"
    (snap / tmp).write_text(fleet.replace("east-a", "east-z"))  # the new fleet: cluster renamed
    job = ROOT / "tests" / "data" / "good" / "job.yaml"
    for state, cluster in (("staging", "east-a"), ("commit", "east-z")):
        (snap / JOURNAL).write_text(json.dumps({"state": state, "write": [["fleet.yaml", tmp]], "remove": []}))
        before = listing(repo)
        run = geosched("place", job, "--snapshot", snap, "-o", "json", home=repo.parent / "home")
        assert listing(repo) == before, "a reader wrote"
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["cluster"] == cluster


def test_temp_files_of_dead_renders_are_swept_by_a_render_only_and_only_those(repo: Path) -> None:
    """Before: a render swept only temp files of the files it wrote, so a killed render's leftovers in other
    directories stayed for ever. Now every render sweeps the tree, a check never does, and only names
    `temp_name` makes, of processes that are gone, regular files or links (never a directory) go."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    here = repo / "clusters" / "west" / "default"
    gone = [here / f"{TMP_PREFIX}beta.yaml.{dead}.0a1b2c3d", repo / f"{TMP_PREFIX}placements.yaml.{dead}.00ff00ff",
            repo / "clusters" / f"{TMP_PREFIX}x.{dead}.12345678"]
    kept = [here / f"{TMP_PREFIX}beta.yaml.{os.getpid()}.0a1b2c3d",  # a live process's: it may be mid-write
            here / f"{TMP_PREFIX}notes", here / f"{TMP_PREFIX}beta.yaml.{dead}.0A1B2C3D",
            here / f"{TMP_PREFIX}beta.yaml.{dead}.0a1b2c3d.orig", repo / "jobs" / f"{TMP_PREFIX}a.yaml.{dead}.0a1b2c3d"]
    for path in gone + kept:
        path.write_text("x")
    (here / f"{TMP_PREFIX}dir.{dead}.0a1b2c3d").mkdir()
    kept.append(here / f"{TMP_PREFIX}dir.{dead}.0a1b2c3d")
    before = listing(repo)
    check = in_process(["gitops", "check", *tree_args(repo)], repo.parent / "home")
    assert check.code == 0, check.stdout + check.stderr
    assert listing(repo) == before, "check swept"
    render = in_process(["gitops", "render", *tree_args(repo), "--at", AT], repo.parent / "home")
    assert render.code == 0, render.stderr
    assert [p for p in gone if p.exists()] == [] and [p for p in kept if not p.exists()] == []


CANARY = "AKIACANARY0123456789"


@pytest.mark.parametrize("where", ["snapshot/fleet.yaml", "jobs/leak.yaml", "clusters.yaml", "jobs"])
def test_a_link_out_of_the_repository_is_refused_before_its_target_is_read(repo: Path, where: str) -> None:
    """A pull request commits a link to a file on the runner (here a secret with a canary, as a YAML mapping, so
    that an error naming its first key would print it). Before: `error: .../fleet.yaml: AKIACANARY...: unknown
    field`, the canary in the CI log (and the first 20 characters of a private key linked the same way)."""
    secret = repo.parent / "runner-secrets"
    secret.mkdir()
    (secret / "leak.yaml").write_text(f"{CANARY}: 1\n")
    link = repo / where
    if link.is_dir():
        shutil.rmtree(link)
    elif link.exists():
        link.unlink()
    link.symlink_to(secret if where == "jobs" else secret / "leak.yaml")
    run = in_process(["gitops", "check", *tree_args(repo)], repo.parent / "home")
    assert run.one_line_error, (run.code, run.stderr)
    assert "leads out of the repository" in run.stderr and CANARY not in run.stdout + run.stderr, run.stderr


def test_links_inside_the_repository_and_paths_the_workflow_names_outside_it_are_read(repo: Path) -> None:
    """The bound is the repository: a link within it is fine, and so is a snapshot the command line itself
    names outside it (the workflow's choice, not the pull request's)."""
    shutil.move(repo / "snapshot", repo / "shared-snapshot")
    (repo / "snapshot").symlink_to("shared-snapshot")
    assert in_process(["gitops", "check", *tree_args(repo)], repo.parent / "home").code == 0
    outside = repo.parent / "snapshot-elsewhere"
    shutil.copytree(repo / "shared-snapshot", outside)
    args = tree_args(repo)
    args[args.index("--snapshot") + 1] = str(outside)
    assert in_process(["gitops", "check", *args], repo.parent / "home").code == 0


# Rendered manifests a pull request damaged, as the fuzz suite's `repo` kind (tests/inputs/mutate.py) made them:
# a second document whose metadata is a string, and a number of 4,301 digits (past Python's int conversion
# limit). `check` reads each manifest back for the hour a held job waits for.
DAMAGED_MANIFESTS = {
    "metadata-a-string": "---\nmetadata: a string\n",
    "huge-integer": "---\nmetadata: {annotations: {}}\nspec: {replicas: " + "9" * 4301 + "}\n",
}


@pytest.mark.parametrize("damage", sorted(DAMAGED_MANIFESTS))
def test_a_damaged_rendered_manifest_is_a_difference_not_a_traceback(tmp_path: Path, damage: str) -> None:
    """Before: AttributeError ('str' object has no attribute 'get') and ValueError (Exceeds the limit (4300
    digits)): the manifests were read with yaml.safe_load_all, past the input gate. Now the file is read
    through the gate; a damaged one is decided afresh, so `check` reports the tree as not what its inputs
    render to (exit 1, with the diff)."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "gitops", repo)
    manifest = repo / "clusters" / "gke-us-central1" / "research" / "diffusion.yaml"
    manifest.write_text(manifest.read_text() + DAMAGED_MANIFESTS[damage])
    run = inputs_geosched("gitops", "check", *tree_args(repo), "--config", repo / "gitops.yaml",
                          home=tmp_path / "home")
    assert run.code == 1 and not run.traceback, (run.code, run.stderr[-3000:])
    assert "diffusion.yaml" in run.stdout + run.stderr


def test_a_job_whose_mapping_mixes_number_and_text_keys_is_no_traceback(tmp_path: Path) -> None:
    """Found by the fuzz suite's structural generator (bench_fuzz --structural --seed 5): `1: one` beside the
    text keys of a PyTorchJob's replica spec. Before: TypeError ('<' not supported between 'int' and 'str')
    from the inputs digest, which sorted the job's keys. Now they sort as text; the job is rendered afresh, so
    `check` reports the tree as not what its inputs render to (exit 1)."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "gitops", repo)
    job = repo / "jobs" / "nlp" / "bert-finetune.yaml"
    job.write_text(job.read_text().replace("      replicas: 1\n", "      replicas: 1\n      1: one\n", 1))
    run = inputs_geosched("gitops", "check", *tree_args(repo), "--config", repo / "gitops.yaml",
                          home=tmp_path / "home")
    assert run.code == 1 and not run.traceback, (run.code, run.stderr[-3000:])
    assert "bert-finetune" in run.stdout + run.stderr


# What `flux bootstrap` commits beside the tree (fluxcd/flux2, pkg/manifestgen/sync: the GitRepository and the
# Kustomization that sync the cluster's directory), in the directory Flux documents: clusters/<name>/flux-system/.
FLUX_SYNC = """\
# This manifest was generated by flux. DO NOT EDIT.
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 1m0s
  ref:
    branch: main
  secretRef:
    name: flux-system
  url: ssh://git@github.com/example/fleet
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 10m0s
  path: ./clusters/east-a
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
"""


@pytest.mark.parametrize("entry", ["remove", "write"])
def test_a_journal_of_the_right_shape_neither_removes_nor_replaces_another_tools_file(repo: Path, entry: str) -> None:
    """attack3 G1: a planted journal `parse_journal` accepts (a committed set whose names fit the tree's layout,
    clusters/*/*/*.yaml) made the next render delete Flux's bootstrap file, or rename the planter's temp file over
    it, exit 0 and "0 removed": the layout fits Flux's directory, and recovery never asked whose file it was."""
    flux = repo / "clusters" / "east-a" / "flux-system"
    flux.mkdir()
    sync = flux / "gotk-sync.yaml"
    sync.write_text(FLUX_SYNC)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "flux bootstrap")
    rel = "clusters/east-a/flux-system/gotk-sync.yaml"
    journal: dict[str, object] = {"state": "commit", "write": [], "remove": [rel]}
    if entry == "write":
        staged = temp_name("gotk-sync.yaml")
        (flux / staged).write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: planted\n")
        journal = {"state": "commit", "write": [[rel, staged]], "remove": []}
    (repo / JOURNAL).write_text(json.dumps(journal))
    run = geosched("gitops", "render", *tree_args(repo), "--at", AT, home=repo.parent / "home")
    assert run.returncode == 0, run.stderr
    assert sync.read_text() == FLUX_SYNC
    # The journal is done with (a render that left it would stop every later one), its temp file with it.
    assert sorted(p.name for p in flux.iterdir()) == ["gotk-sync.yaml"] and not (repo / JOURNAL).exists()
    assert git(repo, "status", "--porcelain") == ""


def test_a_file_that_only_names_geosched_is_neither_removed_nor_rewritten(repo: Path) -> None:
    """attack3 G2: a file was geosched's if the text `geosched gitops render` (or the digest's key) appeared
    anywhere in it, so a hand-written manifest whose comment said it was *not* generated by the command was
    removed by the next render (it renders no such job), and a team's README that named the command was
    rewritten. Now a file is geosched's only if it begins as geosched's begin (a manifest: the digest as an
    annotation)."""
    pvc = repo / "clusters" / "east-a" / "ml" / "dataset-cache.yaml"
    pvc.write_text("# Hand-written: not generated by `geosched gitops render`, keep it.\n"
                   "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: dataset-cache\n  namespace: ml\n"
                   "spec:\n  accessModes: [ReadWriteMany]\n  resources:\n    requests:\n      storage: 10Ti\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "our volume")
    run = geosched("gitops", "render", *tree_args(repo), "--at", AT, home=repo.parent / "home")
    assert run.returncode == 0 and "removed clusters/east-a/ml/dataset-cache.yaml" not in run.stdout, run.stdout
    assert pvc.exists() and git(repo, "status", "--porcelain") == ""

    readme = repo / "clusters" / "west" / "README.md"
    readme.write_text("# west\n\nOur on-prem cluster. Jobs here are placed by `geosched gitops render`; the GPU "
                      "nodes are\nowned by the infra team (#infra-oncall).\n")
    before = listing(repo)
    run = geosched("gitops", "render", *tree_args(repo), "--at", AT, home=repo.parent / "home")
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.strip().splitlines() == [run.stderr.strip()]
    assert "clusters/west/README.md" in run.stderr and "geosched did not write" in run.stderr
    assert listing(repo) == before
