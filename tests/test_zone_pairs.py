"""Zone-pair links without a zones x zones matrix (issue 19 item 5): the same values the matrices held, and a
fleet of 10,000 one-node zones placed in bounded memory."""

from __future__ import annotations

import random
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from geosched.core import catalog, netmodel
from geosched.core.models import LinkStats, Zone, pair_key
from geosched.policies.zonepairs import HIGHER_IS_BETTER, MEASURES, UNKNOWN, ZonePairs

ROOT = Path(__file__).resolve().parents[1]


def _value(link: LinkStats, measure: str) -> float:
    return {"rtt": link.rtt_p50_ms, "rtt95": link.rtt_p95_ms, "loss": link.loss, "tput": link.throughput_gbps}[measure]


def dense(names: list[str], links: dict[tuple[str, str], LinkStats], measure: str) -> np.ndarray:
    """The matrix policies/context.py built before: every pair the unknown link, then each link both ways."""
    index = {n: i for i, n in enumerate(names)}
    out = np.full((len(names), len(names)), UNKNOWN[measure])
    for (a, b), link in links.items():
        if a in index and b in index:
            out[index[a], index[b]] = out[index[b], index[a]] = _value(link, measure)
    return out


def random_zones(rng: random.Random) -> list[Zone]:
    """Real cloud zones from the shipped catalog (the model knows their regions' endpoints) and on-prem zones
    the model knows only within their regions."""
    cloud = sorted({(o.provider, o.region, o.zone) for o in catalog.offerings()})
    picked = [Zone(z, p, r) for p, r, z in rng.sample(cloud, rng.randint(1, 25))]
    sites = [f"site-{i}" for i in range(rng.randint(1, 4))]
    picked += [Zone(f"hall-{i}", "onprem", rng.choice(sites)) for i in range(rng.randint(0, 12))]
    return picked


@pytest.mark.parametrize("seed", range(40))
def test_every_link_and_bound_is_the_matrix_one(seed: int) -> None:
    rng = random.Random(seed)
    zones = random_zones(rng)
    names = sorted(z.name for z in zones)
    model = netmodel.zone_links(zones)
    # Measured links over the model (as the store and live clusters give them), some intra-zone; some name
    # zones outside the fleet, which are ignored.
    pairs = [(a, b) for a in names for b in names if a <= b]
    measured = {pair_key(*p): LinkStats(rng.uniform(0.1, 200), rng.uniform(0.2, 400), rng.choice([0, 0.01]),
                                        rng.uniform(0.5, 80)) for p in rng.sample(pairs, rng.randint(0, len(pairs)))}
    measured[("elsewhere", names[0])] = LinkStats(0.01, 0.01, 0.0, 999.0)
    kind = seed % 3
    links = (netmodel.LayeredLinks(measured, model) if kind == 0 else model if kind == 1 else measured)
    as_dict = dict(links)
    if kind == 0:
        assert as_dict == {**dict(model), **measured}
    by_name = {z.name: z for z in zones}
    regions = sorted({z.region_key for z in zones})
    region_of = np.array([regions.index(by_name[n].region_key) for n in names], dtype=np.int64)
    got = ZonePairs(names, region_of, links)
    z = len(names)
    every = np.arange(z)
    same = region_of[:, None] == region_of[None, :]
    for m in MEASURES:
        matrix = dense(names, as_dict, m)
        pick = np.max if HIGHER_IS_BETTER[m] else np.min
        a, b = np.meshgrid(every, every, indexing="ij")
        assert np.array_equal(got.get(m, a.ravel(), b.ravel()), matrix.ravel())
        assert np.array_equal(got.diagonal(m), np.diag(matrix))
        for r in range(len(regions)):
            inside = np.flatnonzero(region_of == r)
            block = matrix[np.ix_(inside, inside)][~np.eye(inside.size, dtype=bool)]
            want = pick(block) if block.size else (-np.inf if HIGHER_IS_BETTER[m] else np.inf)
            assert got.region_best(m, len(regions))[r] == want, (m, r)
        across = matrix[~same]
        assert got.cross_best(m) == (pick(across) if across.size else (-np.inf if HIGHER_IS_BETTER[m] else np.inf))
        for _ in range(5):
            sa = rng.sample(range(z), rng.randint(1, z))
            sb = rng.sample(range(z), rng.randint(1, z))
            assert got.best(m, np.array(sa), np.array(sb)) == pick(matrix[np.ix_(sa, sb)]), (m, sa, sb)


def _fleet(zones: int, path: Path) -> Path:
    """`zones` one-node zones over 20 on-prem sites: the shape of the issue's fleet (a fleet file of one-node
    zones, tests/data/good/fleet.yaml's node fields), placed on the shipped model (same-zone and same-site
    links)."""
    lines = ["regions:", *(f"  - {{provider: onprem, name: site-{r}, grid_gco2e_per_kwh: {20 + r}, pue: 1.2}}"
                           for r in range(20)), "nodes:"]
    lines += [f"  - {{name: edge-{i:05d}, provider: onprem, region: site-{i % 20}, zone: site-{i % 20}-z{i:05d}, "
              f"gpu: A100, gpus: 8, price_ondemand: {10 + i % 7}, cluster: c{i % 20}}}" for i in range(zones)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def _place(fleet: Path, job: Path, home: Path) -> tuple[int, float, str]:
    """Peak RSS (MiB) and seconds of `geosched place` in a process of its own, and what it printed."""
    # The peak is the process's own VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss over exec from the
    # forked copy of this pytest process, so a child of a large test process reported the parent's size.
    code = ("import runpy, sys; sys.argv = ['geosched', '--home', sys.argv[1], 'place', '--fleet', "
            "sys.argv[2], sys.argv[3]]\n"
            "try:\n    runpy.run_module('geosched', run_name='__main__')\n"
            "finally:\n"
            "    hwm = [line for line in open('/proc/self/status') if line.startswith('VmHWM:')][0]\n"
            "    print('PEAK', hwm.split()[1], file=sys.stderr)\n")
    # Address space capped at 3 GiB: a regression to quadratic matrices fails fast with a MemoryError instead of
    # taking the memory of a machine that other jobs share.
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code, str(home), str(fleet), str(job)], capture_output=True,
                          text=True, cwd=ROOT, timeout=600, preexec_fn=_cap_memory)
    assert done.returncode == 0, done.stderr[-2000:]
    peak = int(done.stderr.rsplit("PEAK ", 1)[1].split()[0]) // 1024
    return peak, time.monotonic() - started, done.stdout


def test_ten_thousand_one_node_zones_place_in_bounded_memory(tmp_path: Path) -> None:
    """Before: four 10,000 x 10,000 matrices (3.2 GB) and 50 million modelled pairs in a dict; a MemoryError."""
    job = tmp_path / "job.yaml"
    job.write_text("name: gang\nworkers: 4\ngpus_per_worker: 8\ngpu: A100\n")
    small, small_s, _ = _place(_fleet(100, tmp_path / "small.yaml"), job, tmp_path / "home")
    large, large_s, out = _place(_fleet(10_000, tmp_path / "large.yaml"), job, tmp_path / "home")
    assert "10,000 nodes in 10,000 zones" in out
    # The fleet itself costs memory (nodes, documents, arrays): linear, and well under the quadratic matrices.
    assert large < small + 400 and large < 500, (small, large)
    # 100 times the zones: reading the 1.4 MB fleet file dominates (linear); the 50 million modelled pairs the
    # old dict built took minutes. Measured: 100 zones 2.8 s, 10,000 zones 7.3 s (interpreter start included).
    assert large_s < 10 * small_s, (small_s, large_s)
