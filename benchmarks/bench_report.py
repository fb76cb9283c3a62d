"""Report speed on a large ledger (run from the repo root, by hand: python -m benchmarks.bench_report
[--intervals 5000] [--days 30]).

Builds a store with `--intervals` node intervals of the embedded fleet's nodes over `--days` days, an hourly
spot price for each offering used (so intervals cross many price changes), then times one report per output.
Every number is this machine's, for spotting regressions, not a promise.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from geosched.core.default_fleet import default_fleet
from geosched.core.models import Pricing
from geosched.providers.base import PriceObservation
from geosched.providers.refresh import record_prices
from geosched.report.ledger import close_interval, open_interval
from geosched.report.report import report
from geosched.store.db import Store

T0 = 1_704_067_200.0


def build(store: Store, count: int, days: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    nodes = [n for n in default_fleet().nodes if n.price_spot]
    span = days * 86400.0
    offers = set()
    for i in range(count):
        node = rng.choice(nodes)
        start = T0 + rng.uniform(0, span - 3600)
        end = min(T0 + span, start + rng.uniform(600, 3 * 86400))
        open_interval(store, kind="node", name=f"{node.name}-{i}", job=f"job-{i % 50}", provider=node.provider,
                      region=node.region, zone=node.zone, cluster=node.cluster, instance_type=node.instance_type,
                      gpu=node.gpu, gpus=node.gpus, pricing=Pricing.SPOT, source="demo", start=start)
        close_interval(store, kind="node", name=f"{node.name}-{i}", source="demo", end=end)
        offers.add(node)
    prices = [PriceObservation(n.provider, n.instance_type, n.region, n.zone, Pricing.SPOT,
                               (n.price_spot or 1.0) * rng.uniform(0.8, 1.2), T0 + h * 3600.0, "bench")
              for n in offers for h in range(0, days * 24, 6)]
    record_prices(store, prices, now=T0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--intervals", type=int, default=5000)
    parser.add_argument("--days", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp)) as store:
        started = time.perf_counter()
        build(store, args.intervals, args.days)
        print(f"built {args.intervals} intervals over {args.days} days in {time.perf_counter() - started:.1f} s")
        until = T0 + args.days * 86400.0
        for kind, by, output in (("cost", "region", "table"), ("carbon", "day", "csv"), ("cost", "job", "json"),
                                 ("carbon", "region", "html")):
            started = time.perf_counter()
            result = report(store, kind, by, T0, until, output, Path(tmp) / f"r.{output}" if output == "html" else None,
                            now=until)
            pieces = len(result.data.lines) if result.data else 0
            print(f"{kind:6} by {by:6} {output:5}: {time.perf_counter() - started:6.2f} s ({pieces} priced pieces)")


if __name__ == "__main__":
    main()
