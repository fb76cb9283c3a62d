"""`render_tree`: job specs + snapshot + cluster config -> `clusters/<cluster>/<namespace>/<job>.yaml` on disk.

Deterministic: the same inputs over the same previous tree give byte-identical files (jobs kept where the previous
index puts them while they fit, the others placed in a fixed order; see plan.py), manifests with sorted
keys, the provenance time from `--at` or the settings, never the clock). Only files whose bytes change are
written; files of jobs that moved, left or no longer fit are removed. See tree.py for the layout and
index.py for `placements.yaml`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from geosched.core.errors import InputError
from geosched.files import writes
from geosched.files.gate import confined, parse_yaml
from geosched.gitops import files
from geosched.gitops.config import EPOCH
from geosched.gitops.index import INDEX, Index, parse_index
from geosched.gitops.load import TreeInputs, load_inputs, repository_root
from geosched.gitops.plan import CLUSTERS_DIR, Unplaced, plan
from geosched.gitops.tree import GITIGNORE, Tree, build_tree
from geosched.grid.carbon import decision_signal, grid_history, load_grid
from geosched.grid.formats import Basis
from geosched.kube import flex
from geosched.kube.provenance import inputs_digest
from geosched.policies.stable import Rebalance


@dataclass(frozen=True)
class Rendered:
    """A tree rendered in memory beside what the output directory holds now."""

    tree: Tree
    inputs: TreeInputs
    existing: dict[str, bytes]
    previous: Index
    changes: files.Changes
    carbon_notes: tuple[str, ...] = ()
    # Why the previous index did not read whole (read entry by entry instead), when it was there.
    previous_fault: InputError | None = None

    @property
    def unplaced(self) -> tuple[Unplaced, ...]:
        return tuple(o for o in self.tree.outcomes if isinstance(o, Unplaced))

    @property
    def placed(self) -> int:
        return len(self.tree.outcomes) - len(self.unplaced)


def render_in_memory(jobs_dir: Path, snapshot_dir: Path, clusters_config: Path, out_dir: Path, *,
                     config: Path | None = None, at: datetime | None = None,
                     rebalance: Rebalance | None = None, carbon_hourly: Path | Sequence[Path] | None = None,
                     carbon_basis: Basis = Basis.LIFECYCLE) -> Rendered:
    """`carbon_hourly`: hourly grid-intensity series (geosched/grid/carbon.py); new decisions use their hour of `at`
    (kept jobs stay), and a flexible job chooses its start in its window (held, suspended, until then).
    Every file read inside the repository must stay inside it (no link out: docs/security.md)."""
    _apart(jobs_dir, out_dir)
    with confined(repository_root(out_dir)):
        inputs = load_inputs(jobs_dir, snapshot_dir, clusters_config, config)
        on_disk = files.read_tree(out_dir)
        paths = [carbon_hourly] if isinstance(carbon_hourly, Path) else list(carbon_hourly or ())
        grid = load_grid(paths, carbon_basis) if paths else None
    existing = on_disk.owned
    previous, fault = parse_index(existing.get(INDEX, b"").decode("utf-8", errors="replace"))
    when = at or inputs.config.at or EPOCH
    notes: tuple[str, ...] = ()
    if grid is not None:
        carbon = decision_signal(inputs.fleet, grid.signal, when)
        # The intensities of the hour are an input like the snapshot: the index names them when they change.
        digests = {**inputs.digests, "carbon": inputs_digest(dict(carbon.signal.intensity))}
        inputs = replace(inputs, carbon=carbon.signal, digests=digests, grid=grid_history(inputs.fleet, grid))
        notes = (*grid.notes, *carbon.notes)
    outcomes = plan(inputs, previous.before(), rebalance, when.timestamp(), held_jobs(previous, existing))
    tree = build_tree(inputs, outcomes, previous, when)
    if GITIGNORE in on_disk.foreign:  # the repository's own: it should carry writes.IGNORE_PATTERN itself
        tree = replace(tree, files={k: v for k, v in tree.files.items() if k != GITIGNORE})
    return Rendered(tree, inputs, existing, previous, files.compare(tree.files, on_disk), notes, fault)


def held_jobs(previous: Index, existing: Mapping[str, bytes]) -> dict[str, tuple[float, float]]:
    """Jobs the previous render held for their hour: key -> (start, first held), read from their manifests."""
    out: dict[str, tuple[float, float]] = {}
    for key, entry in previous.entries.items():
        text = existing.get(entry.file or "")
        if text is None:
            continue
        try:  # through the gate: a pull request may have put anything in a rendered file
            documents = parse_yaml(text.decode("utf-8", errors="replace"), entry.file or "", stream=True)
        except InputError:
            continue  # a damaged file: the job is decided afresh, as for a damaged index
        for doc in documents:
            held = flex.held_until(doc) if isinstance(doc, dict) else None
            if held is not None:
                out[key] = held
    return out


def _apart(jobs_dir: Path, out_dir: Path) -> None:
    """The rendered manifests are Kubernetes jobs too: read back as specs, each job would be defined twice."""
    jobs, tree = jobs_dir.resolve(), (out_dir / CLUSTERS_DIR).resolve()
    if jobs == tree or jobs in tree.parents or tree in jobs.parents:
        raise InputError(str(jobs_dir), "", f"the jobs directory and the rendered tree ({tree}) must not contain "
                         "one another")


def render_tree(jobs_dir: Path, snapshot_dir: Path, clusters_config: Path, out_dir: Path, *,
                config: Path | None = None, at: datetime | None = None,
                rebalance: Rebalance | None = None, carbon_hourly: Path | Sequence[Path] | None = None,
                carbon_basis: Basis = Basis.LIFECYCLE) -> Rendered:
    """Render and write: afterwards `out_dir` holds exactly the rendered tree (in the files geosched owns).
    A render a kill interrupted is finished (or undone) first, so this one starts from a whole tree, and temp
    files of dead renders anywhere in the tree are swept."""
    writes.recover(out_dir, layout=files.OWNED_PATTERNS, sweep=(CLUSTERS_DIR,), owned=files.owned_at)
    rendered = render_in_memory(jobs_dir, snapshot_dir, clusters_config, out_dir, config=config, at=at,
                                rebalance=rebalance, carbon_hourly=carbon_hourly, carbon_basis=carbon_basis)
    files.apply(out_dir, rendered.tree.files, rendered.changes)
    return rendered
