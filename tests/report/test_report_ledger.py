"""The usage ledger, intervals derived from the providers' journal, and pricing at the price of its time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_support import T0, H, price, used

from geosched.core.models import Pricing
from geosched.report import PricedFrom, close_interval, intervals, open_interval
from geosched.report.ledger import ledger_intervals
from geosched.report.records import Origin
from geosched.report.report import report
from geosched.store.db import Store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path)


def test_open_and_close_are_idempotent(store: Store) -> None:
    first = open_interval(store, kind="node", name="n1", provider="aws", region="us-east-1", gpu="A100", gpus=8,
                          source="provider", start=T0, ref="i-1")
    again = open_interval(store, kind="node", name="n1", provider="aws", region="us-east-1", gpu="A100", gpus=8,
                          source="provider", start=T0 + 60, ref="i-1")
    assert again == first
    assert close_interval(store, kind="node", name="n1", source="provider", end=T0 + H, ref="i-1") == 1
    assert close_interval(store, kind="node", name="n1", source="provider", end=T0 + 2 * H, ref="i-1") == 0
    (row,) = ledger_intervals(store)
    assert (row.start, row.end, row.ref) == (T0, T0 + H, "i-1")


def test_a_new_machine_under_a_reused_name_gets_its_own_row(store: Store) -> None:
    for ref in ("i-1", "i-2"):
        open_interval(store, kind="node", name="n1", provider="aws", region="us-east-1", gpu="A100", gpus=8,
                      source="provider", start=T0, ref=ref)
    assert [i.ref for i in ledger_intervals(store)] == ["i-1", "i-2"]


def test_close_before_start_closes_at_start(store: Store) -> None:
    used(store, "n1", T0, T0 - 10)
    (row,) = ledger_intervals(store)
    assert row.end == T0


def test_bad_arguments_are_refused(store: Store) -> None:
    with pytest.raises(ValueError):
        open_interval(store, kind="vm", name="n", provider="aws", region="r", gpu="A100", gpus=1, source="demo")
    with pytest.raises(ValueError):
        open_interval(store, kind="node", name="n", provider="aws", region="r", gpu="A100", gpus=1, source="demo",
                      utilisation=1.5)


def test_intervals_overlapping_the_window(store: Store) -> None:
    used(store, "before", T0, T0 + H)
    used(store, "inside", T0 + 2 * H, T0 + 3 * H)
    used(store, "running", T0 + 2 * H, None)
    used(store, "after", T0 + 10 * H, T0 + 11 * H)
    names = [i.name for i in intervals(store, T0 + H, T0 + 5 * H)]
    assert names == ["inside", "running"]


def test_two_intervals_across_a_price_change_cost_exact_dollars(store: Store) -> None:
    # p4d.24xlarge in use1-az1 costs $30/h from T0 and $36/h from T0 + 2h.
    price(store, "aws", "p4d.24xlarge", "us-east-1", "use1-az1", 30.0, T0)
    price(store, "aws", "p4d.24xlarge", "us-east-1", "use1-az1", 36.0, T0 + 2 * H)
    used(store, "a", T0 + 1 * H, T0 + 3 * H)      # 1 h x $30 + 1 h x $36 = $66
    used(store, "b", T0 + 2.5 * H, T0 + 4 * H)    # 1.5 h x $36        = $54
    doc = json.loads(report(store, "cost", "job", T0, T0 + 24 * H, "json", journal=False).text or "")
    assert doc["total"]["cost_usd"] == 66.0 + 54.0
    assert doc["priced_from_usd"] == {"history": 120.0}
    lines = report(store, "cost", "job", T0, T0 + 24 * H, "table").data
    assert lines is not None
    assert sorted((x.interval.name, x.usd) for x in lines.lines) == [("a", 30.0), ("a", 36.0), ("b", 54.0)]


def test_before_the_first_observation_the_earliest_price_stands_in(store: Store) -> None:
    price(store, "aws", "p4d.24xlarge", "us-east-1", "use1-az1", 30.0, T0 + H)
    used(store, "a", T0, T0 + 2 * H)              # 1 h before the first observation + 1 h after, both $30
    data = report(store, "cost", "job", T0, T0 + 24 * H).data
    assert data is not None
    assert [(x.usd, x.priced_from) for x in data.lines] == [(30.0, PricedFrom.HISTORY_EARLIEST),
                                                            (30.0, PricedFrom.HISTORY)]
    assert data.rows[0].priced_from_label == "history+history-earliest"


def test_without_history_the_catalog_prices_and_says_so(store: Store) -> None:
    # Shipped catalog: a2-highgpu-1g in us-central1-a, $3.67339/h on demand, $1.44296/h spot.
    used(store, "g", T0, T0 + 2 * H, provider="gcp", region="us-central1", zone="us-central1-a",
         instance_type="a2-highgpu-1g", gpus=1)
    used(store, "s", T0, T0 + 2 * H, provider="gcp", region="us-central1", zone="us-central1-a",
         instance_type="a2-highgpu-1g", gpus=1, pricing=Pricing.SPOT)
    doc = json.loads(report(store, "cost", "region", T0, T0 + 24 * H, "json").text or "")
    (row,) = doc["rows"]
    assert row["priced_from"] == "catalog"
    assert row["cost_usd"] == pytest.approx(2 * 3.67339 + 2 * 1.44296, abs=1e-12)


def test_an_unknown_offering_is_unpriced_and_noted(store: Store) -> None:
    used(store, "x", T0, T0 + H, provider="ssh", region="lab", zone="rack1", instance_type="dgx", gpus=8)
    doc = json.loads(report(store, "cost", "region", T0, T0 + 24 * H, "json").text or "")
    (row,) = doc["rows"]
    assert (row["cost_usd"], row["priced_from"], row["unpriced_gpu_hours"]) == (0.0, "unpriced", 8.0)
    assert any("no price for ssh dgx in rack1" in n for n in doc["notes"])


def _journal(store: Store, rows: list[tuple[str, str | None, str, float, float]]) -> None:
    """prov_instances rows (name, provider_id, state, created_at, updated_at) of one gang `g1`."""
    with store.transaction() as db:
        db.execute("INSERT INTO prov_gangs (gang, owner, request, state, created_at, updated_at) "
                   "VALUES ('g1', 'o1', '{}', 'ready', ?, ?)", (T0, T0))
        db.executemany(
            "INSERT INTO prov_instances (gang, name, provider, region, zone, instance_type, gpu, gpus, pricing, "
            "provider_id, state, created_at, updated_at) VALUES ('g1', ?, 'aws', 'us-east-1', 'use1-az1', "
            "'p4d.24xlarge', 'A100', 8, 'on-demand', ?, ?, ?, ?)", rows)


def test_journal_rows_that_launched_become_intervals(store: Store) -> None:
    _journal(store, [
        ("up", "i-up", "launched", T0, T0 + 600),            # running: counted to the window's end
        ("done", "i-done", "terminated", T0, T0 + 2 * H),    # [created_at, updated_at]
        ("planned", None, "intent", T0, T0),                  # never launched
        ("failed", None, "terminated", T0, T0 + 60),          # launch failed: no machine
    ])
    found = {i.name: i for i in intervals(store, T0, T0 + 3 * H)}
    assert set(found) == {"up", "done"}
    assert (found["up"].start, found["up"].end, found["up"].job) == (T0, None, "g1")
    assert (found["done"].start, found["done"].end, found["done"].origin) == (T0, T0 + 2 * H, Origin.JOURNAL)
    price(store, "aws", "p4d.24xlarge", "us-east-1", "use1-az1", 10.0, T0)
    doc = json.loads(report(store, "cost", "job", T0, T0 + 3 * H, "json").text or "")
    # up: 3 h x $10, done: 2 h x $10
    assert doc["rows"][0]["job"] == "g1"
    assert doc["total"]["cost_usd"] == 50.0
    assert any("providers' journal" in n for n in doc["notes"])


def test_a_provider_ledger_row_replaces_the_journal_row_of_the_same_instance(store: Store) -> None:
    _journal(store, [("done", "i-done", "terminated", T0, T0 + 2 * H)])
    open_interval(store, kind="node", name="done", job="g1", provider="aws", region="us-east-1", zone="use1-az1",
                  instance_type="p4d.24xlarge", gpu="A100", gpus=8, source="provider", start=T0 + 60, ref="i-done")
    close_interval(store, kind="node", name="done", source="provider", end=T0 + H, ref="i-done")
    (only,) = intervals(store, T0, T0 + 3 * H)
    assert (only.origin, only.start, only.end) == (Origin.LEDGER, T0 + 60, T0 + H)


def test_a_window_holding_only_the_journal_s_early_start_does_not_count_the_instance(store: Store) -> None:
    # The journal says the machine ran from its intent (T0) to its last write (T0 + 2 h); the ledger knows it ran
    # from T0 + 10 min to T0 + 1 h. A window [T0, T0 + 5 min) or [T0 + 90 min, ...) overlaps only the journal's
    # edges: the ledger row covers the instance all the same, so nothing is counted there.
    _journal(store, [("done", "i-done", "terminated", T0, T0 + 2 * H)])
    open_interval(store, kind="node", name="done", job="g1", provider="aws", region="us-east-1", zone="use1-az1",
                  instance_type="p4d.24xlarge", gpu="A100", gpus=8, source="provider", start=T0 + 600, ref="i-done")
    close_interval(store, kind="node", name="done", source="provider", end=T0 + H, ref="i-done")
    assert intervals(store, T0, T0 + 300) == []
    assert intervals(store, T0 + 90 * 60, T0 + 3 * H) == []
    (only,) = intervals(store, T0, T0 + 3 * H)
    assert only.origin is Origin.LEDGER


def test_the_ledger_api_is_the_one_in_geosched_usage(store: Store) -> None:
    # The write side moved to geosched.store.usage (the providers write it and may not import the report); the
    # report's names are the same functions, so old imports keep working.
    import geosched.report
    import geosched.report.ledger
    import geosched.store.usage

    assert geosched.report.open_interval is geosched.store.usage.open_interval is geosched.report.ledger.open_interval
    assert geosched.report.close_interval is geosched.store.usage.close_interval
