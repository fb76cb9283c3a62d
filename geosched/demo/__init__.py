"""`geosched demo`: the main job, end to end, on the embedded default fleet. Each stage says what is real.

    stages.py        fleet, network, placement against every baseline, Kueue hand-off, trace replay (offline)
    clouds.py        the emulated clouds (moto + fault proxy, the GCE double) and providers wired only to them
    provisioning.py  a placed job launched as a gang on the emulated clouds, with failover, then taken down
    costs.py         cost and carbon of what the demo did, from the demo's own store
    main.py          `run_demo`: the stages in order
"""

from __future__ import annotations

from geosched.demo.main import run_demo
from geosched.demo.stages import demo_jobs

__all__ = ["demo_jobs", "run_demo"]
