"""Fuzzed files of every kind through every command that reads them (tests/inputs/fuzz.py says how they are
made): each ends in success, no fit (exit 3) or one `error:` line with exit 2 (a kind's own answers aside:
`gitops check`'s exit 1 with a diff; `jobs`'s exit 1, one line, for a cluster it cannot reach), never a
traceback or a planted credential, within 10 s and without the process growing by more than 400 MB. Bounded
for CI (about a minute on one core); the 10,000-input run is benchmarks/bench_fuzz.py."""

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
STRUCTURAL_CASES = 200
# The real files the structural generator (tests/inputs/mutate.py) mutates: the example repository (a third of
# the cases: it holds the most files, and `gitops check` runs on whatever a pull request puts in it), the
# example jobs, EKS's and GKE's kubeconfigs, journals of killed writes, the example snapshot.
STRUCTURAL_KINDS = ("repo", "job", "kubeconfig", "repo", "kube-job", "journal", "repo", "fleet", "network")
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
    assert not outcome.leaked, f"{outcome.kind}: a planted credential in the output: {outcome.args}"
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


def test_structural_mutations_of_real_files_end_in_an_answer_or_one_line(work: Path) -> None:
    """STRUCTURAL_CASES cases of the second generator alone, round-robin over the kinds whose seeds are real
    files, seeded: the same cases on every run."""
    rng = random.Random("structural")
    baseline = _peak_kb()
    for i in range(STRUCTURAL_CASES):
        _check(run_case(rng, BY_NAME[STRUCTURAL_KINDS[i % len(STRUCTURAL_KINDS)]], work, structural_only=True))
    assert _peak_kb() - baseline < GROWTH_LIMIT_KB, "the process grew by over 400 MB"


@pytest.mark.parametrize("name", ["job", "trace", "kube-job", "terraform", "kubeconfig", "repo"])
def test_a_sample_through_the_real_entry_point(name: str, work: Path) -> None:
    """The same generator, run as `python -m geosched` (1 GiB address space at most): what users run."""
    def runner(args: list[str | Path], home: Path, env: dict[str, str]) -> Run:
        return geosched(*args, home=home, timeout=HANG_S * 3, env=env)

    rng = random.Random(name)
    for _ in range(2):
        _check(run_case(rng, BY_NAME[name], work, runner))
