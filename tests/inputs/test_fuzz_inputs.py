"""Fuzzed files of every kind through every command that reads them (tests/inputs/fuzz.py says how they are
made): each ends in success, no fit (exit 3) or one `error:` line with exit 2, never a traceback, within 10 s
and without the process growing by more than 400 MB. Bounded for CI (about 30 s on one core); the
10,000-input run is benchmarks/bench_fuzz.py."""

from __future__ import annotations

import random
import resource
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.inputs.fuzz import BY_NAME, HANG_S, KINDS, Kind, Outcome, prepare, run_case
from tests.inputs.inputs_support import Run, geosched

EXAMPLES_PER_KIND = 20
GROWTH_LIMIT_KB = 400 * 1024


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fuzz")
    prepare(path)
    return path


def _peak_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _check(outcome: Outcome) -> None:
    assert not outcome.hang, f"{outcome.kind}: still running after {HANG_S:g} s: {outcome.args}"
    assert outcome.ok, f"{outcome.kind}: exit {outcome.run.code}: {outcome.args}\n{outcome.run.stderr[-3000:]}"


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_fuzzed_inputs_end_in_success_or_one_line(kind: Kind, work: Path) -> None:
    baseline = _peak_kb()

    @settings(max_examples=EXAMPLES_PER_KIND, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(rng=st.randoms(use_true_random=False))
    def case(rng: random.Random) -> None:
        _check(run_case(rng, kind, work))
        assert _peak_kb() - baseline < GROWTH_LIMIT_KB, f"{kind.name}: the process grew by over 400 MB"

    case()


@pytest.mark.parametrize("name", ["job", "trace", "kube-job", "terraform"])
def test_a_sample_through_the_real_entry_point(name: str, work: Path) -> None:
    """The same generator, run as `python -m geosched` (1 GiB address space at most): what users run."""
    def runner(args: list[str | Path], home: Path) -> Run:
        return geosched(*args, home=home, timeout=HANG_S * 3)

    rng = random.Random(name)
    for _ in range(2):
        _check(run_case(rng, BY_NAME[name], work, runner))
