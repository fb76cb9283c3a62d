"""`check_tree`: is the committed tree what its inputs render to? If not, a unified diff and the reasons.

Renders in memory over the tree as it is (so decisions that did not change keep their provenance time, and a
tree rendered with another `--at` is still up to date) and compares bytes; nothing on disk changes.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from geosched.gitops.explain import explain
from geosched.gitops.plan import Placed
from geosched.gitops.render import Rendered, render_in_memory
from geosched.stable import Rebalance


@dataclass(frozen=True)
class CheckResult:
    written: tuple[str, ...]
    """Files a render would write (new or different)."""
    removed: tuple[str, ...]
    """Files a render would remove."""
    why: tuple[str, ...]
    """The reasons, job by job (see explain.py)."""
    diff: str
    """Unified diff, tree on disk (a/) -> rendered tree (b/)."""

    @property
    def up_to_date(self) -> bool:
        return not self.written and not self.removed

    def report(self) -> str:
        if self.up_to_date:
            return "the tree is up to date\n"
        head = [f"the tree is stale: {len(self.written)} file(s) to write, {len(self.removed)} to remove"]
        why = ["", "why:", *(f"  {line}" for line in self.why)] if self.why else []
        return "\n".join([*head, *why, "", ""]) + self.diff


def check_tree(jobs_dir: Path, snapshot_dir: Path, clusters_config: Path, out_dir: Path, *,
               config: Path | None = None, at: datetime | None = None,
               rebalance: Rebalance | None = None, carbon_hourly: Path | None = None) -> CheckResult:
    rendered = render_in_memory(jobs_dir, snapshot_dir, clusters_config, out_dir, config=config, at=at,
                                rebalance=rebalance, carbon_hourly=carbon_hourly)
    changes = rendered.changes
    if changes.clean:
        return CheckResult((), (), (), "")
    return CheckResult(changes.written, changes.removed, tuple(reasons(rendered)), unified_diff(rendered))


def reasons(rendered: Rendered) -> list[str]:
    placed = rendered.tree.index.get("placed", {})
    decisions = {key: str(entry["decision_sha256"]) for key, entry in placed.items()}
    inputs = rendered.tree.index.get("inputs", {})
    outcomes = rendered.tree.outcomes
    assert all(o.spec.key in decisions for o in outcomes if isinstance(o, Placed))
    lines = explain(rendered.previous, inputs, outcomes, decisions)
    # A file whose decision did not change but whose bytes did: nothing in the inputs explains it.
    before = rendered.previous.entries
    for key, entry in placed.items():
        old = before.get(key)
        if entry["file"] in rendered.changes.written and old is not None and old.file == entry["file"] \
                and old.decision_sha256 == decisions[key]:
            lines.append(f"{key}: {entry['file']} differs from what its unchanged decision renders to (edited by "
                         "hand, or rendered by another geosched version)")
    return lines


def unified_diff(rendered: Rendered) -> str:
    parts: list[str] = []
    changes, files, existing = rendered.changes, rendered.tree.files, rendered.existing
    for path in sorted((*changes.written, *changes.removed)):
        old = existing[path].decode("utf-8", errors="replace") if path in existing else None
        new = files.get(path)
        parts.extend(difflib.unified_diff(
            (old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True),
            fromfile=f"a/{path}" if old is not None else "/dev/null",
            tofile=f"b/{path}" if new is not None else "/dev/null"))
    # A last line without a newline would run into the next file's header.
    return "".join(p if p.endswith("\n") else p + "\n\\ No newline at end of file\n" for p in parts)
