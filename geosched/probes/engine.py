"""One probe run: connect, plan over the nodes that answered, echo runs, then throughput tests.

Phases run one after the other because a throughput test fills the queues of its link, which would
inflate any RTT measured across it at the same time. Inside a phase, work is bounded by
`settings.concurrency`; a throughput test also holds its two nodes and its zone-pair link, so no node
runs two tests at once and no two tests share (and halve) one link. The run's deadline cancels what is
left, keeping `settings.cleanup_s` back to stop iperf3 servers and close connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from geosched.core.models import pair_key
from geosched.files.inventory import SshTarget
from geosched.probes.failures import Failure, FailureKind, ProbeError
from geosched.probes.kinds import measure_echo, measure_throughput
from geosched.probes.locks import ResourceLocks
from geosched.probes.parsers import EchoRun, IperfRun
from geosched.probes.plan import Pair, PlanNode, make_plan
from geosched.probes.results import EchoResult, RunReport, ThroughputResult
from geosched.probes.settings import PlanKind, ProbeSettings
from geosched.probes.ssh import Remote

# The share of the run's time the connect phase may take before the plan proceeds without stragglers.
CONNECT_SHARE = 0.5

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class Pool(Remote, Protocol):
    """A Remote that connects to nodes up front and counts its connections (ssh.SshPool)."""

    @property
    def opened(self) -> Mapping[str, int]: ...
    async def connect(self, name: str) -> object: ...


class Progress(Protocol):
    def phase(self, name: str, total: int) -> None: ...
    def advance(self) -> None: ...


class _Silent:
    def phase(self, name: str, total: int) -> None:
        pass

    def advance(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class PlanOptions:
    kind: PlanKind = PlanKind.AUTO
    run: int = 0
    per_zone_pair: int = 2
    throughput_per_zone_pair: int = 1
    throughput_zone_pairs_per_run: int | None = None


class _DeadlineHit(Exception):
    pass


class _Run:
    """The bookkeeping of one run: clock, deadline, failures, and the per-phase costs it reports."""

    def __init__(self, settings: ProbeSettings, progress: Progress) -> None:
        self.settings = settings
        self.progress = progress
        self.loop = asyncio.get_running_loop()
        self.started_at, self.clock0 = time.time(), self.loop.time()
        self.work_until = self.clock0 + max(0.0, settings.deadline_s - settings.cleanup_s)
        self.failures: list[Failure] = []
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.durations: dict[str, list[float]] = {}

    @contextlib.contextmanager
    def phase(self, name: str, total: int) -> Iterator[None]:
        self.progress.phase(name, total)
        self.durations.setdefault(name, [])
        mark, cpu_mark = self.loop.time(), time.process_time()
        try:
            yield
        finally:
            self.wall[name] = self.loop.time() - mark
            self.cpu[name] = time.process_time() - cpu_mark

    def timed(self, phase: str, work: Callable[[K], Awaitable[T]]) -> Callable[[K], Awaitable[T]]:
        async def run(key: K) -> T:
            mark = self.loop.time()
            result = await work(key)
            self.durations[phase].append(self.loop.time() - mark)
            return result
        return run

    def fail(self, subject: str, exc: BaseException) -> None:
        self.failures.append(_failure(subject, exc, self.settings))


async def run_probes(pool: Pool, targets: Sequence[SshTarget], settings: ProbeSettings,
                     options: PlanOptions = PlanOptions(), progress: Progress | None = None) -> RunReport:
    run = _Run(settings, progress or _Silent())
    by_name = {t.name: t for t in targets}
    healthy = await _connect(run, pool, targets)
    plan = make_plan([PlanNode(name, by_name[name].zone) for name in healthy], options.kind, options.run,
                     per_zone_pair=options.per_zone_pair,
                     throughput_per_zone_pair=options.throughput_per_zone_pair if settings.throughput else 0,
                     throughput_zone_pairs_per_run=options.throughput_zone_pairs_per_run)
    echoes = await _echo(run, pool, by_name, plan.echo_pairs) if settings.echo else []
    throughputs = await _throughput(run, pool, by_name, plan.throughput_pairs) if plan.throughput_pairs else []
    return RunReport(plan=plan, started_at=run.started_at, wall_s=run.loop.time() - run.clock0,
                     echoes=tuple(echoes), throughputs=tuple(throughputs), failures=tuple(run.failures),
                     connections=dict(pool.opened), phase_s=run.wall, phase_cpu_s=run.cpu,
                     durations_s={k: tuple(v) for k, v in run.durations.items() if v})


async def _connect(run: _Run, pool: Pool, targets: Sequence[SshTarget]) -> list[str]:
    """Connect every node; the names of those that answered, in inventory order."""
    with run.phase("connect", len(targets)):
        # Stragglers may use at most half the run: the nodes that did answer still get measured.
        until = run.clock0 + CONNECT_SHARE * (run.work_until - run.clock0)
        outcomes = await _bounded([t.name for t in targets], run.timed("connect", pool.connect),
                                  run.settings.concurrency, until, 0.0, run.progress)
    for name, outcome in outcomes.items():
        if isinstance(outcome, _DeadlineHit):
            run.failures.append(Failure(name, FailureKind.TIMEOUT, f"no SSH session after "
                                        f"{run.wall['connect']:.1f}s (half the run's deadline); left out of this run"))
        elif isinstance(outcome, BaseException):
            run.fail(name, outcome)
    return [t.name for t in targets if not isinstance(outcomes[t.name], BaseException)]


async def _echo(run: _Run, pool: Pool, by_name: Mapping[str, SshTarget], pairs: Sequence[Pair]) -> list[EchoResult]:
    async def echo(pair: Pair) -> EchoRun:
        return await measure_echo(pool, by_name[pair[0]], by_name[pair[1]], run.settings)

    results = []
    with run.phase("echo", len(pairs)):
        outcomes = await _bounded(list(pairs), run.timed("echo", echo), run.settings.concurrency, run.work_until,
                                  run.settings.cleanup_s, run.progress)
    for (src, dst), out in outcomes.items():
        if isinstance(out, BaseException):
            run.fail(f"{src}->{dst}", out)
        else:
            results.append(EchoResult(src, dst, out))
    return results


async def _throughput(run: _Run, pool: Pool, by_name: Mapping[str, SshTarget],
                      pairs: Sequence[Pair]) -> list[ThroughputResult]:
    locks = ResourceLocks()
    slots = asyncio.Semaphore(run.settings.concurrency)
    ports: dict[str, int] = {}

    async def tput(pair: Pair) -> IperfRun:
        src, dst = by_name[pair[0]], by_name[pair[1]]
        link = "link:" + "|".join(pair_key(src.zone, dst.zone))
        # Resources first, then a concurrency slot: a test waiting for busy nodes holds no slot that a test
        # on free nodes could use.
        async with locks.hold({f"node:{src.name}", f"node:{dst.name}", link}), slots:
            # Successive tests on one node start on different ports (a closing server may still hold one).
            offset = ports.get(dst.name, 0)
            ports[dst.name] = offset + 1

            async def test(_: Pair) -> IperfRun:
                return await measure_throughput(pool, src, dst, run.settings, offset)

            # Timed inside the locks: the test itself, not the wait for its nodes and link.
            return await run.timed("throughput", test)(pair)

    results = []
    with run.phase("throughput", len(pairs)):
        outcomes = await _bounded(list(pairs), tput, len(pairs), run.work_until, run.settings.cleanup_s,
                                  run.progress)
    for (src, dst), out in outcomes.items():
        if isinstance(out, BaseException):
            run.fail(f"{src}->{dst}", out)
        else:
            results.append(ThroughputResult(src, dst, out))
    return results


async def _bounded(keys: Sequence[K], work: Callable[[K], Awaitable[T]], concurrency: int, until: float,
                   grace_s: float, progress: Progress) -> dict[K, T | BaseException]:
    """Run work(key) for every key, at most `concurrency` at once; whatever is unfinished at `until` is
    cancelled (and given `grace_s` to clean up) and reported as a deadline failure."""
    slots = asyncio.Semaphore(concurrency)

    async def one(key: K) -> T:
        async with slots:
            return await work(key)

    tasks = {key: asyncio.create_task(one(key)) for key in keys}
    for task in tasks.values():
        task.add_done_callback(lambda _: progress.advance())
    if not tasks:
        return {}
    loop = asyncio.get_running_loop()
    _, pending = await asyncio.wait(tasks.values(), timeout=max(0.0, until - loop.time()))
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending, timeout=grace_s)
    out: dict[K, T | BaseException] = {}
    for key, task in tasks.items():
        if not task.done() or task.cancelled():
            out[key] = _DeadlineHit()
        else:
            exc = task.exception()
            out[key] = exc if exc is not None else task.result()
    return out


def _failure(subject: str, exc: BaseException, settings: ProbeSettings) -> Failure:
    if isinstance(exc, ProbeError):
        return Failure(subject, exc.kind, exc.reason)
    if isinstance(exc, _DeadlineHit):
        return Failure(subject, FailureKind.DEADLINE, f"unfinished at the run's deadline ({settings.deadline_s:g}s)")
    return Failure(subject, FailureKind.PROBE, f"{type(exc).__name__}: {str(exc)[:160]}")
