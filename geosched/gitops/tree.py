"""The tree a set of decisions renders to, in memory: relative path -> file text. Pure.

    clusters/<cluster>/README.md              one per configured cluster, so its directory always exists
    clusters/<cluster>/<namespace>/<job>.yaml the job's manifests (geosched.kube.render, sorted keys)
    placements.yaml                           the index (see index.py)
    .gitignore                                keeps temp files of an interrupted render out of `git add -A`

A job that moves gets a new pod template, which Kubernetes does not change in place. Flux recreates it with
`force: true` on its Kustomization (examples/gitops/flux); Argo CD only per resource, by the annotation
`argocd.argoproj.io/sync-options: Force=true,Replace=true` (argo-cd docs/user-guide/sync-options.md, "Force Sync":
delete, then create). So each job object of the tree carries those options, merged with any the job file gives;
the Application must sync with ApplyOutOfSyncOnly=true, or every sync would recreate every job
(examples/gitops/argocd). Flux and kubectl ignore the annotation.

Provenance time: a decision is stamped with `at` when it is new. When the previous index shows the same
decision (same `geosched.io/inputs-sha256`), its first stamp is kept, so a job whose inputs did not change
keeps its bytes however often, and with whatever `--at`, the tree is rendered again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from geosched.core.errors import InputError
from geosched.files.writes import IGNORE_PATTERN
from geosched.gitops.index import INDEX, Index, PlacementIndexDoc, Stamp, index_doc, index_text
from geosched.gitops.load import TreeInputs
from geosched.gitops.plan import CLUSTERS_DIR, Outcome, Placed
from geosched.kube import flex
from geosched.kube.provenance import CLUSTER, DIGEST, timestamp
from geosched.kube.render import RenderOptions, render, to_yaml

README = "README.md"
GITIGNORE = ".gitignore"
STAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
ARGOCD_SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
RECREATE = ("Force=true", "Replace=true")


@dataclass(frozen=True)
class Tree:
    files: Mapping[str, str]
    outcomes: tuple[Outcome, ...]
    index: PlacementIndexDoc


def build_tree(inputs: TreeInputs, outcomes: Sequence[Outcome], previous: Index, at: datetime) -> Tree:
    files: dict[str, str] = {}
    for name in sorted(inputs.clusters):
        files[f"{CLUSTERS_DIR}/{name}/{README}"] = cluster_readme(name)
    owners: dict[str, str] = {}
    stamps: dict[str, Stamp] = {}
    for o in outcomes:
        if not isinstance(o, Placed):
            continue
        if o.path in owners:
            raise InputError(o.spec.input.source, "", f"renders to {o.path}, as does the job in {owners[o.path]} "
                             "(give the jobs different names or namespaces)")
        owners[o.path] = o.spec.source
        text, stamps[o.spec.key] = render_job(o, inputs, previous, at)
        files[o.path] = text
    doc = index_doc(inputs, outcomes, stamps)
    files[INDEX] = index_text(doc)
    files[GITIGNORE] = f"# Written by `geosched gitops render`: temp files of a render that was interrupted.\n" \
                       f"{IGNORE_PATTERN}\n"
    return Tree(files=dict(sorted(files.items())), outcomes=tuple(outcomes), index=doc)


def render_job(o: Placed, inputs: TreeInputs, previous: Index, at: datetime) -> tuple[str, Stamp]:
    # Alternatives and rejected zones explain a decision but are not part of it: left in, a change to a zone
    # this job did not take would change its digest and rewrite its file.
    bare = replace(o.placement, alternatives=(), rejected=())
    # The snapshot's shared or sliced GPU nodes of the job's cluster, as `submit` reads them from the cluster: where
    # the GPU pin would admit one in the gang's zones, the gang is held to its placed hosts.
    options = RenderOptions(now=at, compact_kind=inputs.config.compact_kind, nodes=inputs.fleet.by_name,
                            not_whole=inputs.fleet.not_whole.get(o.cluster.name, ()))
    manifests = render(o.spec.input, bare, o.cluster, options)
    digest = decision_digest(manifests)
    stamp = timestamp(at)
    before = previous.entries.get(o.spec.key)
    if before is not None and before.decision_sha256 == digest and before.placed_at not in (None, stamp):
        assert before.placed_at is not None
        stamp = before.placed_at
        first = datetime.strptime(stamp, STAMP_FORMAT).replace(tzinfo=UTC)
        manifests = render(o.spec.input, bare, o.cluster, replace(options, now=first))
    if o.start_at is not None:
        flex.hold(job_object(manifests, o.spec.input.name), o.start_at, o.submitted_at or o.start_at,
                  source=o.spec.input.source)
    return to_yaml([recreated_on_change(m) for m in manifests]), Stamp(digest, stamp)


def recreated_on_change(obj: dict[str, Any]) -> dict[str, Any]:
    """The job object (the one carrying the placement's provenance) with Argo CD's Force and Replace sync options
    added to the ones it has; anything else as it is."""
    notes = (obj.get("metadata") or {}).get("annotations") or {}
    if CLUSTER not in notes:
        return obj
    have = [o.strip() for o in str(notes.get(ARGOCD_SYNC_OPTIONS, "")).split(",") if o.strip()]
    keep = [o for o in have if o.split("=", 1)[0] not in {r.split("=", 1)[0] for r in RECREATE}]
    options = ",".join([*keep, *RECREATE])
    return {**obj, "metadata": {**obj["metadata"], "annotations": {**notes, ARGOCD_SYNC_OPTIONS: options}}}


def job_object(manifests: Sequence[dict[str, Any]], name: str) -> dict[str, Any]:
    """The job itself among its rendered manifests (companions, flavors and policies ride along)."""
    for m in reversed(manifests):
        if m.get("kind") in flex.job_kinds() and (m.get("metadata") or {}).get("name") == name:
            found: dict[str, Any] = m
            return found
    raise AssertionError(f"job {name} is not among its rendered manifests")


def decision_digest(manifests: Sequence[Mapping[str, Any]]) -> str:
    for m in manifests:
        value = (m.get("metadata") or {}).get("annotations", {}).get(DIGEST)
        if isinstance(value, str):
            return value
    raise AssertionError(f"rendered manifests carry no {DIGEST} annotation")


def cluster_readme(name: str) -> str:
    return (f"# {name}\n\n"
            "Generated by `geosched gitops render`: one file per job placed on this cluster, under\n"
            "`<namespace>/<job>.yaml`. Do not edit; change the job specs, the snapshot or the cluster config and\n"
            "render again. This file keeps the directory in Git when no job is placed here, so the cluster's\n"
            "Argo CD Application or Flux Kustomization stays and prunes the last job that left.\n")
