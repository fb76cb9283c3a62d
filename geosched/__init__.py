"""geosched: zone-first placement of distributed training gangs across geo-distributed GPU clusters."""

__version__ = "0.1.0"


# The Python API (geosched/api.py). Imported here, after the subpackages it uses, so that `geosched.simulate` is
# the function (`from geosched.simulate import ...` still reaches the subpackage through sys.modules).
from geosched.api import load_fleet, load_job, load_network, place, simulate

__all__ = ["__version__", "load_fleet", "load_job", "load_network", "place", "simulate"]
