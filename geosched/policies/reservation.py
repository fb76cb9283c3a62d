"""Zone-aware EASY reservations for blocked gangs (issue 22): where and when a gang that cannot start now will fit
whole, and whether a job starting now past it would take what it needs.

EASY backfill (Lifka, "The ANL/IBM SP scheduling system", JSSPP 1995; Slurm's backfill plugin) gives the blocked
head of the queue a reservation: the earliest time enough of the machine is free for it, computed from the running
jobs' expected ends; a later job may start now only if it does not delay that reservation (it ends before the
reserved time, or it uses only what the reservation leaves over). A count of free GPUs is not enough for gangs
that must sit in one topology domain: a small job in the only zone (or cluster) that would soon hold a large gang
whole delays it as surely as one that runs past its time, while the GPU count says nothing is lost. Here, as
Kueue's Topology-Aware Scheduling counts capacity per topology domain (kubernetes-sigs/kueue
`pkg/cache/scheduler/tas_flavor_snapshot.go`: a domain's count is the pods its free capacity holds), the
reservation is per **domain**:

- domains are a (cluster, GPU model) pool's zones, its regions, and the pool itself (a gang stays in one pool, as
  every policy here requires); a domain's count is the workers its nodes' free GPUs hold, node by node;
- the running jobs are released in order of expected end; the reservation's **start** is the first end after which
  some domain holds the gang's workers, and its **domain** the lowest level (zone, then region, then pool) of
  those that hold it then, BestFit (the smallest count) among them. A gang that fits by count now but was refused
  (a gang waiting for a healthy ring, policies/patience.py) is reserved at the next end, as the GPU-count shadow
  time was: the policy, not the count, holds it now;
- a job may start now past a reservation (`Reservation.admits`) if it ends by the start, or if the domain still
  holds the gang at the start without the GPUs the job holds then (it uses other nodes, or leaves enough);
  `Reservation.after` counts a job so admitted, so several cannot together take what one alone leaves.

Run-time estimates are the caller's (the replay: each job's trace duration times its placement's slow-down, the run
it will have). A wrong estimate only moves the reserved start: a job running past its estimate leaves the gang
blocked at the reserved time, and the reservation is computed again, from what runs then, at every pass of the
queue; nothing is held across passes, so no reservation can outlive the jobs it was computed from (no deadlock).

Pure: numpy arrays in, a frozen value out; the caller computes reservations once per pass of the queue, not per
decision or per node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from geosched.policies.context import BoolArray, IntArray, PlacementContext

LEVELS = ("zone", "region", "pool")


@dataclass(frozen=True, slots=True)
class Domains:
    """Each node's domain at every level (`ids[level][node]`) and each domain's label, once per fleet; `idle`: each
    node's GPUs with nothing running (what any domain can ever hold). No per-domain node masks are kept: a fleet of
    10,000 one-node zones would need 10,000 x 10,000 of them; a reservation makes its own."""

    ids: tuple[IntArray, ...]
    labels: tuple[tuple[str, ...], ...]
    idle: IntArray
    lists: tuple[list[int], ...] = ()  # `ids` as plain lists, for the release loop

    @classmethod
    def of(cls, ctx: PlacementContext, idle: IntArray) -> Domains:
        pool, zone, region = ctx.group_of.tolist(), ctx.zone_of.tolist(), ctx.region_of.tolist()
        label = ctx.group_labels
        keys = (
            [f"zone {ctx.zone_names[z]} ({label[g]})" for g, z in zip(pool, zone, strict=True)],
            [f"region {ctx.region_keys[r]} ({label[g]})" for g, r in zip(pool, region, strict=True)],
            [f"pool {label[g]}" for g in pool],
        )
        ids, labels = [], []
        for level in keys:
            names = sorted(set(level))
            index = {name: i for i, name in enumerate(names)}
            ids.append(np.array([index[name] for name in level], dtype=np.int64))
            labels.append(tuple(names))
        return cls(tuple(ids), tuple(labels), idle, tuple(i.tolist() for i in ids))

    def nodes(self, level: int, domain: int) -> BoolArray:
        """The nodes of one domain."""
        mask: BoolArray = self.ids[level] == domain
        return mask


@dataclass(frozen=True, slots=True)
class Reservation:
    """A blocked gang's reserved start and domain. `free_at_start`: every node's free GPUs at the start, less what jobs
    admitted past it hold then; `count`: the workers the domain holds at the start (at least `workers`)."""

    job: str
    start: float
    domain: str
    nodes: BoolArray
    workers: int
    gpus_per_worker: int
    free_at_start: IntArray
    count: int

    def lost(self, nodes: Sequence[int], gpus: Sequence[int]) -> int:
        """The workers the domain holds less at the start if these GPUs are still held then."""
        gpw, free = self.gpus_per_worker, self.free_at_start
        pairs = zip(nodes, gpus, strict=True)
        return sum(int(free[n]) // gpw - (int(free[n]) - g) // gpw for n, g in pairs if self.nodes[n])

    def admits(self, nodes: Sequence[int], gpus: Sequence[int], finish: float) -> bool:
        """A job holding `gpus` on `nodes` until `finish` does not delay the reservation."""
        return finish <= self.start or self.count - self.lost(nodes, gpus) >= self.workers

    def after(self, nodes: Sequence[int], gpus: Sequence[int], finish: float) -> Reservation:
        """The reservation once such a job has started (it holds its GPUs at the start if it runs past it)."""
        if finish <= self.start:
            return self
        free = self.free_at_start.copy()
        lost = self.lost(nodes, gpus)
        for n, g in zip(nodes, gpus, strict=True):
            free[n] -= g
        return Reservation(self.job, self.start, self.domain, self.nodes, self.workers, self.gpus_per_worker, free,
                           self.count - lost)


def reserve(job: str, workers: int, gpus_per_worker: int, free: IntArray,
            releases: Sequence[tuple[float, Sequence[int], Sequence[int]]], domains: Domains,
            taken: BoolArray | None = None) -> Reservation | None:
    """The gang's reservation: `free` GPUs per node now, `releases` the running jobs' (expected end, nodes, GPUs), in
    any order. Domains with a node in `taken` (earlier reservations' domains) are not considered. None when no domain
    ever holds the gang (every running job released)."""
    # Plain lists: a release touches a handful of nodes, where numpy's per-element overhead would dominate.
    gpw = gpus_per_worker
    f: list[int] = free.tolist()
    ids = domains.lists
    counts = [np.bincount(level, weights=free // gpw, minlength=len(labels)).astype(np.int64).tolist()
              for level, labels in zip(domains.ids, domains.labels, strict=True)]
    allowed = [[True] * len(labels) for labels in domains.labels]
    if taken is not None and taken.any():
        for level, level_ids in enumerate(domains.ids):
            for d in np.unique(level_ids[taken]).tolist():
                allowed[level][d] = False
    if not any(allowed[level][d] for level, level_ids in enumerate(domains.ids)
               for d, c in enumerate(np.bincount(level_ids, weights=domains.idle // gpw).tolist()) if c >= workers):
        return None  # no domain left to it holds the gang even idle: every release would be walked for nothing
    reached = any(c >= workers and allowed[level][d] for level, count in enumerate(counts) for d, c in enumerate(count))
    ordered = sorted(releases, key=lambda r: r[0])
    for k, (finish, nodes, gpus) in enumerate(ordered):
        for n, g in zip(nodes, gpus, strict=True):
            before = f[n] // gpw
            f[n] += g
            delta = f[n] // gpw - before
            if delta:
                for level, domain_of in enumerate(ids):
                    d = domain_of[n]
                    counts[level][d] += delta
                    reached = reached or (counts[level][d] >= workers and allowed[level][d])
        if not reached or (k + 1 < len(ordered) and ordered[k + 1][0] == finish):
            continue  # nothing holds it yet, or jobs ending together are released together
        for level, level_count in enumerate(counts):
            fits = [d for d, c in enumerate(level_count) if c >= workers and allowed[level][d]]
            if fits:
                best = min(fits, key=lambda d: (level_count[d], d))  # BestFit: the smallest count that holds it
                return Reservation(job, float(finish), domains.labels[level][best], domains.nodes(level, best),
                                   workers, gpw, np.array(f, dtype=np.int64), level_count[best])
    return None
