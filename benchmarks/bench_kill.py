"""Renders and exports killed at random (run from the repo root, by hand:
python -m benchmarks.bench_kill [--runs 200] [--seed 1]).

`--runs` children run `geosched gitops render` or `geosched snapshot export` (yaml, and json over a yaml
snapshot) and are SIGKILLed at a moment drawn uniformly over a clean run's duration measured first
(tests/gitops/killcampaign.py). Reported: how many kills landed, where the output was right after them (old,
new, or a set cut in the middle), how many runs had temp files right after the kill, and the targets: mixed
sets seen by a reader (0), readers that wrote (0), files outside the output whose bytes or modification time
changed (0), re-runs that did not give a clean run's bytes (0), temp files left after the re-run (0), runs whose
stderr holds a traceback (0), runs still going at 20x a clean run's time (0), and the children's peak memory
(VmHWM; under 500 MB).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from tests.gitops.killcampaign import campaign, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="geosched-kill-") as workdir:
        outcomes = campaign(args.runs, args.seed, Path(workdir))
    print(json.dumps(summary(outcomes), indent=2))
    for o in outcomes:
        if not o.clean:
            print(f"NOT CLEAN: {o}")


if __name__ == "__main__":
    main()
