"""Fuzzed inputs of every kind through the commands that read them: tracebacks, hangs and peak memory.

    python -m benchmarks.bench_fuzz --cases 10000 [--seed 1] [--kinds job,fleet] [--structural] [--json out.json]

Method: the generators of the CI fuzz suite (tests/inputs/fuzz.py: valid files of each kind mutated value by
value and byte by byte, known attacks such as alias bombs and 200,000-deep nesting, FIFOs, /dev/zero and
directories in place of files; tests/inputs/mutate.py: structural mutations of real files, the example GitOps
repository, the example jobs, EKS and GKE kubeconfigs, journals of killed writes; `--structural`: those
alone), round-robin over the kinds, each case run in this process through `geosched.cli.main.main` as `python -m
geosched` runs it. A case passes when the command succeeds, finds no fit (exit 3) or prints one `error:` line
with exit 2 (a kind's own answers aside: `gitops check`'s diff, exit 1; `jobs`'s unreachable cluster, one
line, exit 1), and no planted credential shows in its output. A hang is a case still running after 10 s
(interrupted by an alarm). Peak memory is this process's maximum resident set (getrusage), imports and all;
the address space is capped at 2 GiB so that a regression fails here instead of swapping the machine.
Targets (issues 12 and 19): 0 tracebacks, 0 hangs over 10 s, 0 credentials shown, peak memory under 500 MB.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tests.inputs.fuzz import BY_NAME, KINDS, prepare, run_case

ADDRESS_SPACE = 2 << 30


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kinds", default=",".join(k.name for k in KINDS))
    parser.add_argument("--minutes", type=float, help="Stop after this long (a loaded machine): the figures "
                        "say how many cases ran.")
    parser.add_argument("--structural", action="store_true", help="Only structural mutations of real files.")
    parser.add_argument("--json", type=Path, help="Also write the figures here.")
    parser.add_argument("--show", type=int, default=5, help="Failures printed in full.")
    args = parser.parse_args()
    kinds = [BY_NAME[name] for name in args.kinds.split(",")]
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    rng = random.Random(args.seed)
    counts: Counter[str] = Counter()
    failures = []
    slowest = (0.0, "")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="geosched-fuzz-") as tmp:
        work = Path(tmp)
        prepare(work)
        for i in range(args.cases):
            if args.minutes is not None and time.monotonic() - started > args.minutes * 60:
                break
            kind = kinds[i % len(kinds)]
            outcome = run_case(rng, kind, work, structural_only=args.structural)
            counts["cases"] += 1
            counts["hangs"] += outcome.hang
            counts["tracebacks"] += outcome.run.traceback
            counts["leaks"] += outcome.leaked
            counts[f"exit {outcome.run.code}"] += 1
            if outcome.seconds > slowest[0]:
                slowest = (outcome.seconds, kind.name)
            if not outcome.ok:
                counts["failures"] += 1
                failures.append(outcome)
                if len(failures) <= args.show:
                    print(f"--- case {i} ({kind.name}): {outcome.run.code}, {outcome.seconds:.1f} s: "
                          f"{' '.join(outcome.args)}\n{outcome.run.stderr[-3000:]}", file=sys.stderr)
            if (i + 1) % 500 == 0:
                print(f"{i + 1} cases, {counts['failures']} failures, {time.monotonic() - started:.0f} s",
                      file=sys.stderr)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    figures = {"cases": counts["cases"], "kinds": [k.name for k in kinds], "seed": args.seed,
               "structural_only": args.structural, "tracebacks": counts["tracebacks"],
               "hangs_over_10s": counts["hangs"], "credential_leaks": counts["leaks"],
               "other_failures": sum(not (f.run.traceback or f.hang or f.leaked) for f in failures),
               "peak_memory_mb": round(peak_mb, 1), "slowest_case_s": round(slowest[0], 2),
               "slowest_kind": slowest[1], "wall_s": round(time.monotonic() - started, 1),
               "exit_codes": {k.removeprefix("exit "): v for k, v in sorted(counts.items()) if k.startswith("exit ")},
               "failures_by_kind": dict(Counter(f.kind for f in failures))}
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if not failures and peak_mb < 500 else 1


if __name__ == "__main__":
    sys.exit(main())
