"""The kill campaign (see killcampaign.py): `gitops render` and `snapshot export` SIGKILLed at random points;
a reader never sees a mixed set, one re-run gives a clean run's bytes, and no temp file is left."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.gitops.killcampaign import campaign, summary

pytestmark = pytest.mark.integration

RUNS = int(os.environ.get("GEOSCHED_KILL_RUNS", "30"))
SEED = int(os.environ.get("GEOSCHED_KILL_SEED", "3"))


def test_killed_renders_and_exports_leave_no_mixed_set_and_no_temp_file(tmp_path: Path) -> None:
    outcomes = campaign(RUNS, SEED, tmp_path)
    stats = summary(outcomes)
    dirty = [o for o in outcomes if not o.clean]
    assert not dirty, dirty
    assert stats["runs"] == RUNS and len(stats["by_scenario"]) == 3
    # The campaign really cuts sets in the middle, and kills really leave temp files for the next run to clear.
    assert stats["killed"] >= RUNS // 2
    assert stats["states_after_kill"].get("pending", 0) >= 1
    assert stats["runs_with_temp_files_after_kill"] >= 1
    print(stats)
