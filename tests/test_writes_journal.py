"""Recovery of a journal it finds (geosched.files.writes) against journals and directories drawn at random: names of
the right shape and hostile ones (absolute, `..`, separators, another name's temp, `.git`, names outside the
set's layout), over temp files, targets and directories that are missing, regular, directories, or links out
of the tree. Whatever is drawn: nothing outside the tree changes; a reader changes nothing at all; a writer
raises ForeignJournal (and changes nothing) or recovers, after which no journal is left and the only changes
are temp files renamed over or removed beside files of the set, and files of the set removed."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geosched.core.errors import OutputError
from geosched.files.writes import JOURNAL, TMP_PREFIX, ForeignJournal, in_layout, reading, recover, temp_name

LAYOUT = ("*.yaml", "clusters/*/*.yaml")
TARGETS = ["fleet.yaml", "network.yaml", "clusters/x/a.yaml", "clusters/y/b.yaml"]
HOSTILE_NAMES = ["{outside}/victim", "../outside/victim", "../../outside/victim", "clusters/../../outside/victim",
                 ".git/config", "jobs/spec.yaml", "clusters/x/../../../outside/victim", "", ".", "a/./b.yaml"]
STATES = ["missing", "file", "directory", "link-out"]


def _temp(draw: Any, target: str) -> str:
    name = target.rsplit("/", 1)[-1]
    return draw(st.sampled_from([temp_name(name), temp_name(name), temp_name("other.yaml"),
                                 f"{TMP_PREFIX}{name}.1.XYZ", f"sub/{temp_name(name)}", "{outside}/victim",
                                 "../outside/victim", "../../outside/victim"]))


@st.composite
def cases(draw: Any) -> dict[str, Any]:
    names = st.sampled_from(TARGETS + HOSTILE_NAMES)
    writes = [[t, _temp(draw, t)] for t in draw(st.lists(names, max_size=4, unique=True))]
    removes = draw(st.lists(names, max_size=3, unique=True))
    journal: Any = {"state": draw(st.sampled_from(["staging", "commit"])), "write": writes, "remove": removes}
    if draw(st.integers(0, 9)) == 0:
        journal = draw(st.sampled_from([[], {"state": "commit"}, {"state": "commit", "write": [[1, 2]], "remove": []},
                                        "text", None]))
    return {"journal": journal,
            "dirs": {d: draw(st.sampled_from(["directory", "directory", "missing", "link-out"]))
                     for d in ("clusters/x", "clusters/y")},
            "entries": {t: draw(st.sampled_from(STATES)) for t in TARGETS},
            "temps": [draw(st.sampled_from(STATES)) for _ in writes]}


def snapshot(root: Path) -> dict[str, tuple[str, bytes | str, int]]:
    out: dict[str, tuple[str, bytes | str, int]] = {}
    for here, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(here) / name
            st_ = p.lstat()
            kind = "link" if p.is_symlink() else "dir" if p.is_dir() else "file"
            body: bytes | str = os.readlink(p) if kind == "link" else p.read_bytes() if kind == "file" else ""
            out[str(p.relative_to(root))] = (kind, body, st_.st_mtime_ns)
    return out


def make(path: Path, state: str, outside: Path) -> None:
    if state == "missing":
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    if state == "file":
        path.write_text(f"content of {path.name}\n")
    elif state == "directory":
        path.mkdir(exist_ok=True)
        (path / "inside").write_text("x")
    else:
        path.symlink_to(outside / "victim")


def build(base: Path, case: dict[str, Any]) -> tuple[Path, Path, str]:
    root, outside = base / "tree", base / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "victim").write_text("the user's data\n")
    (outside / "dir" / "a.yaml").write_text("the user's too\n")
    root.mkdir()
    for d, state in case["dirs"].items():
        if state == "directory":
            (root / d).mkdir(parents=True)
        elif state == "link-out":
            (root / d).parent.mkdir(parents=True, exist_ok=True)
            (root / d).symlink_to(outside / "dir")
    for target, state in case["entries"].items():
        if (root / target).parent.is_dir() and not (root / target).parent.is_symlink():
            make(root / target, state, outside)
    journal = json.loads(json.dumps(case["journal"]).replace("{outside}", str(outside)))
    if isinstance(journal, dict) and journal.get("write") and len(journal["write"]) == len(case["temps"]):
        for (target, tmp), state in zip(journal["write"], case["temps"], strict=True):
            where = (root / target).parent / tmp
            if "/" not in tmp and where.parent.is_dir() and not where.parent.is_symlink():
                make(where, state, outside)
    text = json.dumps(journal)
    (root / JOURNAL).write_text(text)
    return root, outside, text


def is_temp(rel: str) -> bool:
    return rel.rsplit("/", 1)[-1].startswith(TMP_PREFIX)


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_recovery_never_reaches_outside_the_tree_and_a_reader_never_writes(case: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root, outside, _ = build(Path(tmp), case)
        outside_before, before = snapshot(outside), snapshot(root)
        try:
            with reading(root, layout=LAYOUT) as view:
                for target in TARGETS:
                    view.path(target)
        except ForeignJournal:
            pass
        assert snapshot(root) == before and snapshot(outside) == outside_before, "a reader wrote"
        refused = False
        try:
            recover(root, layout=LAYOUT)
        except ForeignJournal:
            assert snapshot(root) == before, "a foreign journal was acted on"
            return
        except OutputError:
            refused = True  # the file system said no, in one line; the journal stays for the next writer
        finally:
            assert snapshot(outside) == outside_before, "recovery touched a file outside the tree"
        after = snapshot(root)
        assert refused or JOURNAL not in after
        for rel in set(before) | set(after):
            if before.get(rel) == after.get(rel) or is_temp(rel) or rel == JOURNAL:
                continue
            # A changed, new or removed entry: a file of the set (renamed over, or removed), nothing else.
            assert in_layout(rel, LAYOUT), (rel, before.get(rel), after.get(rel))
            assert after.get(rel) is None or after[rel][0] == "file", (rel, after.get(rel))
