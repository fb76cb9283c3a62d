"""Local, real-HTTP doubles of the cloud APIs geosched talks to.

- :class:`GceDouble`: Compute Engine v1 REST API for google-cloud-compute.
- :class:`GkeDouble`: GKE v1 REST API (clusters, node pools, operations) for google-cloud-container.
- :class:`Ec2FaultProxy`: fault-injecting proxy in front of moto's EC2 server.
"""

from ._http import CallRecord, FaultRule
from .faultproxy import Ec2Fault, Ec2FaultProxy, MotoServer
from .gce import AcceleratorTypeSpec, GceDouble, GceFault, MachineTypeSpec, ZoneSpec
from .gke import GkeDouble, GkeFault

__all__ = [
    "AcceleratorTypeSpec",
    "CallRecord",
    "Ec2Fault",
    "Ec2FaultProxy",
    "FaultRule",
    "GceDouble",
    "GceFault",
    "GkeDouble",
    "GkeFault",
    "MachineTypeSpec",
    "MotoServer",
    "ZoneSpec",
]
