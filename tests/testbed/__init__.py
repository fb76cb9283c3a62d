"""Network-namespace testbed for integration tests of SSH-based network probes.

See README.md in this directory.  Typical use::

    with Testbed(zones={"eu": 2, "us": 2}, links={("eu", "us"): Link(20, rate_mbit=100)}) as tb:
        host = tb.host("us-1")
        subprocess.run(host.ssh_argv(["ping", "-c", "1", tb.host("eu-1").address]))
"""

from .model import Fault, Host, Link, SlowBanner, Unreachable, WrongHostKey, rtt_agrees
from .netns import TestbedError, cleanup_stale, missing_requirements
from .testbed import Testbed

__all__ = [
    "Fault",
    "Host",
    "Link",
    "SlowBanner",
    "Testbed",
    "TestbedError",
    "Unreachable",
    "WrongHostKey",
    "cleanup_stale",
    "missing_requirements",
    "rtt_agrees",
]
