"""Energy and emissions against hand-computed numbers (METHODOLOGY.md section 6 shows the same arithmetic)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from report_support import T0, H, used

from geosched import policies
from geosched.core import catalog
from geosched.core.default_fleet import default_fleet, default_network
from geosched.core.energy import CCF_CPU, CCF_CPU_DEFAULT, EnergyModel, energy
from geosched.core.errors import InputError
from geosched.core.models import CarbonSignal, Placement
from geosched.core.specs import InstanceSpec, family
from geosched.files.documents import parse_job
from geosched.files.gate import Kind, load_document
from geosched.grid.carbon import parse_carbon_csv as parse_signal
from geosched.policies import PlacementContext
from geosched.policies.energy import kwh_per_gpu_hour
from geosched.report import close_interval, open_interval
from geosched.report.assemble import ReportData
from geosched.report.energy import embodied_g, platform_embodied_kg
from geosched.report.report import report
from geosched.store.db import Store

# GCP a2-highgpu-1g: 1 x A100 (CCF: 46 W idle, 407 W max), 12 vCPUs, 85 GiB; us-central1: PUE 1.11, 412.72 g/kWh.
GPU_W = 1 * (46 + 0.9 * (407 - 46))           # 370.9 W at utilisation 0.9
CPU_W = 12 * (0.68 + 0.5 * (4.11 - 0.68))     # 28.74 W: CCF GCP min/max per vCPU at 50%
MEM_KWH_PER_H = 85 * 0.000392                 # 0.03332 kWh per hour
KWH_2H = ((GPU_W + CPU_W) * 2 / 1000 + MEM_KWH_PER_H * 2) * 1.11   # (0.7998... + 0.06664) x 1.11 = 0.9611712
G_2H = KWH_2H * 412.72                        # 396.694577664 gCO2e


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path)


def _a2(store: Store, start: float, end: float, utilisation: float | None = None) -> None:
    used(store, "g", start, end, provider="gcp", region="us-central1", zone="us-central1-a",
         instance_type="a2-highgpu-1g", gpus=1, utilisation=utilisation)


def _data(store: Store, **kwargs: Any) -> ReportData:
    data = report(store, "carbon", "region", T0 - 24 * H, T0 + 48 * H, **kwargs).data
    assert data is not None
    return data


def test_the_inputs_are_the_shipped_figures() -> None:
    power = catalog.gpu_power()["A100"]
    region = catalog.regions()["gcp:us-central1"]
    offer = catalog.offering_index()[("gcp", "a2-highgpu-1g", "us-central1-a")]
    assert (power.idle_watts, power.max_watts) == (46, 407)
    assert (region.pue, region.grid_gco2e_per_kwh) == (1.11, 412.72)
    assert (offer.gpus, offer.vcpus, offer.memory_gib) == (1, 12, 85)
    assert (CCF_CPU["gcp"].min_watts, CCF_CPU["gcp"].max_watts) == (0.68, 4.11)
    # The default for providers CCF does not cover is named in geosched.core.energy (no cloud import): still CCF's
    # AWS averages, the coefficients the AWS spec states.
    assert CCF_CPU["aws"] == CCF_CPU_DEFAULT and (CCF_CPU_DEFAULT.min_watts, CCF_CPU_DEFAULT.max_watts) == (0.74, 3.5)


def test_a_known_gpu_in_a_known_region_emits_exactly(store: Store) -> None:
    _a2(store, T0, T0 + 2 * H)
    data = _data(store)
    assert math.isclose(GPU_W, 370.9) and math.isclose(CPU_W, 28.74)
    assert math.isclose(KWH_2H, 0.9611712, rel_tol=1e-12)
    assert math.isclose(G_2H, 396.694577664, rel_tol=1e-12)
    assert data.total.energy_kwh == pytest.approx(0.9611712, rel=1e-12)
    assert data.total.gco2e == pytest.approx(396.694577664, rel=1e-12)
    assert data.total.gco2e_per_kwh == pytest.approx(412.72)


def test_recorded_utilisation_replaces_the_default(store: Store) -> None:
    _a2(store, T0, T0 + H, utilisation=0.0)
    # GPU at idle: 46 W; CPU and memory as before: (46 + 28.74) / 1000 + 0.03332 = 0.10806 kWh x 1.11
    assert _data(store).total.energy_kwh == pytest.approx(0.10806 * 1.11, rel=1e-12)


def test_energy_function_by_hand() -> None:
    e = energy(hours=2, gpus=8, gpu=catalog.gpu_power()["V100"], gpu_utilisation=0.5, vcpus=64,
               cpu=CCF_CPU["aws"], cpu_utilisation=0.5, memory_gb=488, memory_kwh_per_gb_hour=0.000392, pue=1.135)
    # GPU: 8 x (35 + 0.5 x 271) = 1364 W; CPU: 64 x (0.74 + 0.5 x 2.76) = 135.68 W; memory: 488 x 2 x 0.000392
    assert e.gpu_kwh == pytest.approx(2.728)
    assert e.cpu_kwh == pytest.approx(0.27136)
    assert e.memory_kwh == pytest.approx(0.382592)
    assert e.kwh == pytest.approx((2.728 + 0.27136 + 0.382592) * 1.135)


def test_hourly_series_is_read_hour_by_hour(store: Store) -> None:
    # T0 is a UTC midnight, so its epoch hour is 0 mod 24: hour 0 of the series is 100 g/kWh, hour 1 is 300.
    series = (100.0, 300.0) + (0.0,) * 22
    signal = CarbonSignal(intensity={}, profile={"gcp:us-central1": series})
    _a2(store, T0 + 0.5 * H, T0 + 1.5 * H)
    data = _data(store, carbon=signal)
    half = KWH_2H / 4                              # energy of half an hour
    assert [round(x.gco2e_per_kwh or 0) for x in data.lines] == [100, 300]
    assert data.total.gco2e == pytest.approx(half * 100 + half * 300, rel=1e-12)   # = 96.11712
    assert data.total.gco2e == pytest.approx(96.11712, rel=1e-12)


def test_a_signal_mean_overrides_the_catalog_and_regions_without_one_keep_it(store: Store) -> None:
    _a2(store, T0, T0 + 2 * H)
    data = _data(store, carbon=CarbonSignal(intensity={"gcp:us-central1": 100.0}))
    assert data.total.gco2e == pytest.approx(KWH_2H * 100, rel=1e-12)
    assert _data(store, carbon=CarbonSignal(intensity={"aws:us-east-1": 1.0})).total.gco2e == pytest.approx(G_2H)


def test_embodied_emissions_follow_ccf_and_are_off_by_default(store: Store) -> None:
    _a2(store, T0, T0 + 2 * H)
    assert _data(store).total.embodied_gco2e is None
    # Platform of the a2-highgpu family: a2-highgpu-8g, 96 vCPUs, 680 GiB, 8 GPUs.
    te_kg = 1000 + 100 * (2 - 1) + (680 - 16) * 533 / 384 + 8 * 150     # 3221.6458... kg
    expected = te_kg * 1000 * 2 / 35040 * 12 / 96                        # 22.985... g
    assert _data(store, embodied=True).total.embodied_gco2e == pytest.approx(expected, rel=1e-12)
    platform = InstanceSpec("gcp", "a2-highgpu-8g", 8, 96, 680)
    assert platform_embodied_kg(platform) == pytest.approx(te_kg)
    assert embodied_g(platform, 12, 2) == pytest.approx(expected)
    assert family("gcp", "a2-highgpu-1g") == "a2-highgpu" and family("aws", "p4d.24xlarge") == "p4d"


def test_unknown_gpu_and_region_are_counted_conservatively_and_noted(store: Store) -> None:
    used(store, "x", T0, T0 + H, provider="ssh", region="lab", zone="rack1", instance_type="box", gpu="B300", gpus=1)
    data = _data(store)
    worst = max(catalog.gpu_power().values(), key=lambda p: p.max_watts)
    # GPU only (no vCPU figures for "box"), at the most power-hungry known part, at the default PUE 1.135.
    assert data.total.energy_kwh == pytest.approx(worst.watts(0.9) / 1000 * 1.135)
    assert data.total.gco2e == 0.0 and data.total.uncounted_kwh == data.total.energy_kwh
    assert any("GPU B300 has no power figures" in n for n in data.notes)
    assert any("no grid intensity for region ssh:lab" in n for n in data.notes)


def test_energy_model_defaults_are_the_documented_ones() -> None:
    model = EnergyModel(gpu_power=catalog.gpu_power())
    assert (model.gpu_utilisation, model.cpu_utilisation, model.memory_kwh_per_gb_hour) == (0.9, 0.5, 0.000392)
    assert not model.embodied


def test_carbon_signal_file() -> None:
    signal = parse_signal("region,hour,gco2e_per_kwh\ngcp:us-central1,,400\ngcp:us-central1,1,20\n"
                          "gcp:us-central1,0,10\n", "c.csv")
    assert signal.intensity == {"gcp:us-central1": 400.0}
    assert signal.profile == {"gcp:us-central1": (10.0, 20.0)}
    for text, reason in (("region,hour\n", "line 1"), ("region,hour,gco2e_per_kwh\nus,0,1\n", "provider:region"),
                         ("region,hour,gco2e_per_kwh\na:b,0,x\n", "must be a number"),
                         ("region,hour,gco2e_per_kwh\na:b,1,1\n", "without gaps")):
        with pytest.raises(InputError, match=reason):
            parse_signal(text, "c.csv")


# The shipped example jobs (examples/jobs, also the demo's jobs): a one-node A100 job, one zone of eight H100
# nodes, and a 64-node H100 gang that spans zones. Issue 23 item 3: `place` said 18.70 kgCO2e/h for
# pretrain-64 while the report charged 23.218 kgCO2e for the same hour (140.5 vs 173.8 for pretrain-512).
@pytest.mark.parametrize("example", ["train-8.yaml", "train-64.yaml", "train-512.yaml"])
def test_place_kgco2e_per_hour_times_hours_is_what_the_report_charges(store: Store, example: str) -> None:
    fleet, network = default_fleet(), default_network()
    path = Path(__file__).parents[2] / "examples" / "jobs" / example
    job = parse_job(load_document(path, Kind.JOB), str(path))
    placed = policies.place(job, PlacementContext(fleet, network), explain=False)
    assert isinstance(placed, Placement)
    for a in placed.assignments:
        node = fleet.by_name[a.node]
        open_interval(store, kind="job", name=job.name, job=job.name, provider=node.provider, region=node.region,
                      zone=node.zone, cluster=node.cluster, instance_type=node.instance_type, gpu=node.gpu,
                      gpus=a.workers * job.gpus_per_worker, pricing=job.pricing, source="demo", start=T0, ref=node.name)
        close_interval(store, kind="job", name=job.name, source="demo", end=T0 + 2 * H, ref=node.name)
    data = report(store, "carbon", "job", T0 - H, T0 + 3 * H).data
    assert data is not None and not data.notes
    assert data.total.gco2e == pytest.approx(placed.score.gco2e_per_hour * 2, rel=1e-9)


def test_a_gpu_hour_carries_its_share_of_the_host() -> None:
    # a2-highgpu-1g in us-central1 (figures above): the placement's figure per GPU-hour is the report's 2-hour
    # worked example halved, host included, not the GPU alone.
    ctx = PlacementContext(default_fleet(), default_network())
    model = EnergyModel(gpu_power=catalog.gpu_power())
    spec = InstanceSpec("gcp", "a2-highgpu-1g", 1, 12, 85)
    assert model.kwh_per_gpu_hour(catalog.gpu_power()["A100"], 0.9, "gcp", spec, 1.11) == pytest.approx(KWH_2H / 2)
    a3 = next(i for i, n in enumerate(ctx.fleet.nodes) if n.instance_type == "a3-highgpu-8g")
    gpu_only = catalog.gpu_power()["H100"].watts(0.9) / 1000 * ctx.fleet.regions[ctx.fleet.nodes[a3].region_key].pue
    assert kwh_per_gpu_hour(ctx, 0.9)[a3] > gpu_only * 1.1
