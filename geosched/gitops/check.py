"""`check_tree`: is the committed tree what its inputs render to? If not, a unified diff and the reasons.
And would its pods find nodes? Every pod's node constraints (nodeSelector, required node affinity: geosched's
pins and the job's own) must admit at least one node of its cluster in the snapshot, matched on the labels
the nodes carry (`geosched.core.nodelabels.selectable`); a value no node carries is reported with the values
they do carry.

Renders in memory over the tree as it is (so decisions that did not change keep their provenance time, and a
tree rendered with another `--at` is still up to date) and compares bytes; nothing on disk changes. A `check`
reads what Git would commit: a render a kill interrupted is neither finished nor undone here (that is the next
render's job), only reported, and a journal geosched cannot have written is refused (exit 2): the tree may
come from a pull request (docs/security.md).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from geosched.core import nodelabels
from geosched.core.errors import one_line
from geosched.files import writes
from geosched.files.gate import parse_yaml
from geosched.gitops.explain import explain
from geosched.gitops.files import OWNED_PATTERNS
from geosched.gitops.plan import CLUSTERS_DIR, Placed
from geosched.gitops.render import Rendered, render_in_memory
from geosched.grid.formats import Basis
from geosched.kube import affinity
from geosched.policies.stable import Rebalance


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
    unmatched: tuple[str, ...] = ()
    """Pods of the rendered tree that no node of their cluster in the snapshot admits, with the reason."""

    @property
    def up_to_date(self) -> bool:
        return not self.written and not self.removed

    @property
    def passed(self) -> bool:
        return self.up_to_date and not self.unmatched

    def report(self) -> str:
        pins = ["no node of the snapshot admits these pods:", *(f"  {line}" for line in self.unmatched), ""] \
            if self.unmatched else []
        if self.up_to_date:
            return "\n".join([*pins, "the tree is up to date", ""])
        head = [f"the tree is stale: {len(self.written)} file(s) to write, {len(self.removed)} to remove"]
        why = ["", "why:", *(f"  {line}" for line in self.why)] if self.why else []
        return "\n".join([*pins, *head, *why, "", ""]) + self.diff


def check_tree(jobs_dir: Path, snapshot_dir: Path, clusters_config: Path, out_dir: Path, *,
               config: Path | None = None, at: datetime | None = None,
               rebalance: Rebalance | None = None, carbon_hourly: Path | Sequence[Path] | None = None,
               carbon_basis: Basis = Basis.LIFECYCLE) -> CheckResult:
    with writes.reading(out_dir, layout=OWNED_PATTERNS) as view:
        interrupted = view.interrupted
    rendered = render_in_memory(jobs_dir, snapshot_dir, clusters_config, out_dir, config=config, at=at,
                                rebalance=rebalance, carbon_hourly=carbon_hourly, carbon_basis=carbon_basis)
    changes = rendered.changes
    unmatched = tuple(unmatched_pins(rendered))
    if changes.clean:
        return CheckResult((), (), (), "", unmatched)
    why = reasons(rendered)
    if interrupted:
        why.insert(0, f"a render was interrupted ({writes.JOURNAL} is left): render again to finish it")
    if rendered.previous_fault is not None:
        why.insert(0, f"{rendered.previous_fault}: the index does not read whole, so the jobs of its entries that "
                      "do not read are placed afresh")
    return CheckResult(changes.written, changes.removed, tuple(why), unified_diff(rendered), unmatched)


def unmatched_pins(rendered: Rendered) -> list[str]:
    """`<file>: <kind>/<name> <path>: <reason>` for each pod no node of its cluster in the snapshot admits."""
    by_cluster: dict[str, list[dict[str, str]]] = {}
    for node in rendered.inputs.fleet.nodes:
        if node.cluster is not None:
            by_cluster.setdefault(node.cluster, []).append(dict(nodelabels.selectable(node)))
    out: list[str] = []
    for path, text in sorted(rendered.tree.files.items()):
        parts = path.split("/")
        if len(parts) != 4 or parts[0] != CLUSTERS_DIR or not path.endswith(".yaml"):
            continue
        nodes = by_cluster.get(parts[1], [])
        for obj in parse_yaml(text, path, stream=True):  # libyaml when present: a tree has many files
            if not isinstance(obj, dict):
                continue
            for constraint in affinity.node_constraints(obj):
                if not any(affinity.admits(labels, constraint) for labels in nodes):
                    reason = affinity.why_none(constraint, nodes) if nodes else \
                        f"the snapshot has no node of cluster {parts[1]}"
                    name = (obj.get("metadata") or {}).get("name")
                    # One line each, whatever the label values hold (they come from the inputs).
                    out.append(one_line(f"{path}: {obj.get('kind')}/{name} {constraint.path}: {reason}"))
    return out


def reasons(rendered: Rendered) -> list[str]:
    index = rendered.tree.index
    decisions = {key: entry.decision_sha256 for key, entry in index.placed.items()}
    outcomes = rendered.tree.outcomes
    assert all(o.spec.key in decisions for o in outcomes if isinstance(o, Placed))
    lines = explain(rendered.previous, index.inputs, outcomes, decisions)
    # A file whose decision did not change but whose bytes did: nothing in the inputs explains it.
    before = rendered.previous.entries
    for key, entry in index.placed.items():
        old = before.get(key)
        if entry.file in rendered.changes.written and old is not None and old.file == entry.file \
                and old.decision_sha256 == decisions[key]:
            lines.append(f"{key}: {entry.file} differs from what its unchanged decision renders to (edited by "
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
