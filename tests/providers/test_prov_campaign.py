"""The randomised fault campaign (see campaign.py): provisioning processes killed with SIGKILL at random
points under random faults, then resumed or taken down; nothing may leak and no record may stay open."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from geosched_emulators import Ec2FaultProxy, GceDouble, MotoServer
from tests.providers.campaign import MAX_STALL_S, Emulators, campaign, summary

pytestmark = pytest.mark.integration

RUNS = int(os.environ.get("GEOSCHED_CAMPAIGN_RUNS", "50"))
SEED = int(os.environ.get("GEOSCHED_CAMPAIGN_SEED", "7"))


def test_killed_provisioning_leaks_nothing(moto: MotoServer, proxy: Ec2FaultProxy, gce: GceDouble,
                                           tmp_path: Path) -> None:
    emu = Emulators(moto, proxy, gce)
    outcomes = campaign(emu, RUNS, SEED, tmp_path)
    stats = summary(outcomes)
    dirty = [(o.plan, o.unrecorded, o.leaked_after_down, o.open_rows, o.notes) for o in outcomes if not o.clean]
    assert not dirty, dirty
    assert stats["runs"] == RUNS
    # The campaign really kills (how many kills land before a run ends depends on the machine's speed).
    assert stats["killed"] >= RUNS // 4
    assert stats["resumed_ok"] >= 1
    # Real sleep: the fault proxy holds a stalled request for up to MAX_STALL_S of real time before moto gets it;
    # after that, nothing a stalled request could still create turns up.
    time.sleep(MAX_STALL_S)
    from tests.providers.campaign import alive

    assert all(alive(emu, o.plan.gang) == {} for o in outcomes)
    print(stats)
