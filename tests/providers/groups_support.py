"""What the node group tests of EKS and GKE share: `fast` settings (test_nodegroups.py, test_nodepools.py). The
SIGKILL campaigns (test_nodegroups_kill.py, test_nodepools_kill.py) keep their own kill helpers, which also check the
usage ledger."""

from __future__ import annotations

from geosched.core.retry import RetryPolicy
from geosched.providers.nodegroups.launch import GroupSettings


def fast(**overrides: object) -> GroupSettings:
    base: dict[str, object] = {"poll_s": 0.01, "call_timeout_s": 5.0, "settle_s": 1.0,
                               "retry": RetryPolicy(attempts=3, initial_s=0.01, max_s=0.05)}
    base.update(overrides)
    return GroupSettings(**base)  # type: ignore[arg-type]
