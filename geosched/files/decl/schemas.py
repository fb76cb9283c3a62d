"""The JSON Schema of every declared document, as docs/schemas holds it (`python -m geosched.console.kinds docs/schemas`
writes them with the list kinds' schemas; the tests compare the committed files)."""

from __future__ import annotations

import json

from geosched.files.decl.base import Document, OutputDocument
from geosched.files.decl.fleet import FleetDoc
from geosched.files.decl.inventory import InventoryDoc
from geosched.files.decl.job import JobDoc
from geosched.files.decl.network import NetworkDoc
from geosched.files.decl.placement import NoFitDoc, PlacementDoc
from geosched.files.decl.probe import ProbeRunDoc
from geosched.files.decl.provisioning import GangStatusDoc, ProvisionPlanDoc, ProvisionResultDoc
from geosched.files.decl.reports import CarbonReportDoc, CostReportDoc
from geosched.files.decl.settings import SettingsDoc
from geosched.files.decl.simulation import SimulationReportDoc
from geosched.files.decl.submit import SubmitOutcomeDoc
from geosched.gitops.config import GitOpsConfigDoc
from geosched.kube.config import ClusterConfigDoc
from geosched.kube.multikueue.settings import DispatcherConfigDoc
from geosched.kube.scheduler.settings import SchedulerConfigDoc

# Declared beside their package where one owns them (the GitOps, cluster, scheduler and dispatcher settings).
DECLARED: tuple[type[Document], ...] = (
    ClusterConfigDoc,
    DispatcherConfigDoc,
    FleetDoc,
    GitOpsConfigDoc,
    InventoryDoc,
    JobDoc,
    NetworkDoc,
    SchedulerConfigDoc,
)
# What geosched prints, written through these declarations (geosched.console.output.emit_document takes one; the
# tests validate each command's output against the schema and read it back through the declaration).
WRITTEN: tuple[type[OutputDocument], ...] = (
    CarbonReportDoc, CostReportDoc, GangStatusDoc, NoFitDoc, PlacementDoc, ProbeRunDoc, ProvisionPlanDoc,
    ProvisionResultDoc, SettingsDoc, SimulationReportDoc, SubmitOutcomeDoc,
)


def schema_files() -> dict[str, str]:
    schemas = [(d.KIND, d.schema_document()) for d in DECLARED] + [(d.KIND, d.schema_document()) for d in WRITTEN]
    return {f"{kind}.schema.json": json.dumps(schema, indent=2) + "\n" for kind, schema in schemas}
