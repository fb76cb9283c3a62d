"""Every list the CLI prints, as one model per kind: its keys, their JSON types, and which only `-o wide` shows.

The commands build rows with exactly these keys; `geosched.console.output.emit_list` turns them into a table, a wide
table, JSON, YAML or CSV, and docs/schemas/<Kind>List.schema.json is written from them. Documents (one object,
such as a placement) are declared in geosched.files.decl, which writes their schemas; their kinds are named here too.
"""

from __future__ import annotations

from geosched.console.output import Column, ListKind

C = Column

GPU_OFFERINGS = ListKind("GpuOffering", (
    C("provider", wide=True), C("region", wide=True), C("zone"), C("instance_type"), C("gpu"), C("gpus", "integer"),
    C("vcpus", "number", wide=True), C("memory_gib", "number", wide=True), C("usd_per_hour", "number"),
    C("spot_usd_per_hour", "number", nullable=True), C("usd_per_gpu_hour", "number", nullable=True),
    C("gco2e_per_hour", "number", nullable=True),
    C("price_observed_at", "time", nullable=True, wide=True), C("price_age", wide=True),
    C("spot_risk_source", nullable=True, wide=True), C("spot_risk_detail", nullable=True),
    C("spot_hazard_per_node_hour", "number", nullable=True, wide=True),
    C("spot_risk_observed_at", "time", nullable=True, wide=True), C("price_note", nullable=True, wide=True)),
    "GPU offerings per zone (price_observed_at null, price_age `shipped`: the shipped catalog's list price; "
    "spot_risk_*: the spot market's interruption risk and its source, as provision ranks it; price_note: why "
    "the shipped catalog flagged a price (geosched/core/pricecheck.py), null when it did not)")

GPU_MODELS = ListKind("GpuModel", (
    C("gpu"), C("gfd_product", nullable=True), C("gke_accelerator", nullable=True), C("offered_by", "strings")),
    "GPU models (names are case-insensitive; GFD and GKE names are accepted too)")

POLICIES = ListKind("Policy", (C("name"), C("default", "boolean"), C("description")),
                    "placement policies, each with what it does")

PLACEMENT_RECORDS = ListKind("PlacementRecord", (
    C("id", "integer"), C("created_at", "time"), C("job"), C("policy"), C("cluster", nullable=True),
    C("zones", "strings"), C("regions", "strings", wide=True), C("gpus", "integer"), C("score", "number"),
    C("usd_per_hour", "number"), C("gco2e_per_hour", "number", wide=True), C("step_ms", "number", wide=True)),
    "placements recorded in the store")

GANGS = ListKind("Gang", (
    C("gang"), C("state"), C("provider", nullable=True), C("zone", nullable=True),
    C("instance_type", nullable=True, wide=True), C("nodes_up", "integer"), C("nodes", "integer", nullable=True),
    C("open", "integer", wide=True), C("usd_per_hour", "number"), C("created_at", "time", wide=True),
    C("age_h", "number")),
    "gangs")

GANG_DOWN = ListKind("GangDown", (
    C("gang"), C("state"), C("terminated", "integer"), C("api_calls", "integer", wide=True),
    C("errors", "strings")),
    "down")

# `provision --cluster`: the zones a gang's EKS node group may go to, in plan order, and the group it got.
NODEGROUP_PLAN = ListKind("NodegroupCandidate", (
    C("rank", "integer"), C("cluster"), C("region", wide=True), C("zone"), C("zone_name"), C("subnet"),
    C("instance_type"), C("nodes", "integer"), C("capacity_type"), C("usd_per_hour", "number"),
    C("kgco2e_per_hour", "number", nullable=True, wide=True)),
    "node group plan (zone: AWS zone ID; zone_name: its name in this account; usd_per_hour: the whole group)")

NODEGROUPS = ListKind("Nodegroup", (
    C("gang"), C("state"), C("cluster"), C("zone", nullable=True), C("subnet", nullable=True),
    C("nodegroup", nullable=True), C("instance_type", nullable=True), C("nodes", "integer"),
    C("capacity_type", nullable=True), C("usd_per_hour", "number", nullable=True), C("api_calls", "integer", wide=True),
    C("message")),
    "node group")

ORPHANS = ListKind("OrphanInstance", (
    C("kind"), C("provider"), C("region"), C("zone", nullable=True), C("cluster", nullable=True), C("id"),
    C("gang", nullable=True), C("owner", nullable=True), C("state")),
    "instances, node groups and node pools geosched tagged that no open record names (kind: instance, node "
    "group, node pool; a group's region is its cluster's region or GKE location, its id its name in the cluster)")

CHECKS = ListKind("ProviderCheck", (C("provider"), C("item"), C("status"), C("ok", "boolean", wide=True),
                                    C("detail")), "provider check")

PLACED_JOBS = ListKind("PlacedJob", (
    C("cluster"), C("namespace"), C("kind"), C("name"), C("zones", "strings"), C("state"),
    C("policy", nullable=True, wide=True), C("placed_at", "time", nullable=True, wide=True),
    C("started", "time", nullable=True), C("ended", "time", nullable=True)),
    "placed jobs")

_MEASURES = (C("rtt_ms", "number"), C("rtt_p95_ms", "number"), C("loss", "number"),
             C("throughput_gbps", "number"), C("samples", "integer"), C("age_s", "number", wide=True),
             C("stale", "boolean", wide=True))

NODE_LINKS = ListKind("NodeLink", (C("src"), C("dst"), C("src_zone", nullable=True, wide=True),
                                   C("dst_zone", nullable=True, wide=True), *_MEASURES),
                      "measured node pairs")

ZONE_LINKS = ListKind("ZoneLink", (C("src_zone"), C("dst_zone"), *_MEASURES), "measured zone pairs")

# Tables of documents: the columns a document's own tables are drawn from (`output.table`), keyed as its JSON.

# `place --explain` / `-o wide`: the Placement's candidates (the chosen one and its alternatives), their score's
# keys (`documents.score_to_dict`); bounding_hop is its two nodes as `a->b` (one token: never wrapped). --explain
# shows the terms and what they stand on in 80 columns (issue 23 item 8: all of them made 140-152); the hop that
# bounds each step and its link, $ and carbon per hour are in `-o wide` (the chosen one's are on the lines above).
CANDIDATES = (
    C("zones", "strings"), C("cluster", nullable=True), C("total", "number"), C("network", "number"),
    C("cost", "number"), C("carbon", "number"), C("step_ms", "number"), C("comm_ms", "number", wide=True),
    C("usd_per_hour", "number", wide=True), C("gco2e_per_hour", "number", wide=True),
    C("bounding_hop", nullable=True, wide=True), C("worst_rtt_ms", "number", wide=True),
    C("worst_loss", "number", wide=True), C("min_throughput_gbps", "number", nullable=True, wide=True))

# A provisioning's attempts (`providers.cli.attempt_rows`; `provision`, `status GANG`, the demo): what was tried
# and why it failed fit 80 columns with the provider's message wrapped whole (issue 23 item 8: all columns made
# 171 and the GCE message was cut at "Try a different zone,"); the error class, code and counts in `-o wide`.
ATTEMPTS = (
    C("seq", "integer"), C("provider", wide=True), C("zone"), C("instance_type"), C("market", wide=True),
    C("outcome"), C("error", nullable=True, wide=True), C("code", nullable=True, wide=True),
    C("api_calls", "integer", wide=True), C("retries", "integer", wide=True), C("seconds", "number", wide=True),
    C("why"))

# `simulate`: a SimulationReport's results, one per policy (`PolicyResult.summary`), drawn one row per metric;
# times in hours where people read them.
SIMULATION_RESULTS = (
    C("policy"), C("avg_jct_s", "number", header="avg jct h", scale=1 / 3600),
    C("p95_jct_s", "number", header="p95 jct h", scale=1 / 3600),
    C("makespan_s", "number", header="makespan h", scale=1 / 3600),
    C("avg_queue_s", "number", header="avg queue h", scale=1 / 3600),
    C("gpu_util", "number"), C("cost_usd", "number"), C("kgco2e", "number"), C("jobs", "integer"),
    C("unplaced", "integer"), C("avg_slowdown", "number"), C("multi_zone_jobs", "integer"),
    C("flexible_jobs", "integer", wide=True), C("deadline_misses", "integer", wide=True),
    C("avg_jct_inflexible_s", "number", header="avg jct inflexible h", scale=1 / 3600, wide=True))


def report_columns(report: str, by: str, embodied: bool = False) -> tuple[Column, ...]:
    """A CostReport's or CarbonReport's rows (`report.formats.row`), grouped `by` (their first key); grams are
    shown as kg in the table."""
    kind: tuple[Column, ...]
    if report == "cost":
        kind = (C("cost_usd", "number"), C("usd_per_gpu_hour", "number", nullable=True),
                C("priced_from", nullable=True), C("unpriced_gpu_hours", "number", wide=True))
    else:
        kind = (C("energy_kwh", "number"), C("gco2e", "number", header="kgco2e", scale=1 / 1000),
                C("gco2e_per_kwh", "number", nullable=True), C("uncounted_kwh", "number", wide=True))
        if embodied:
            kind += (C("embodied_gco2e", "number", nullable=True, header="embodied kgco2e", scale=1 / 1000),)
    return (C(by), C("intervals", "integer", wide=True), C("gpu_hours", "number"), *kind)


# Documents: one object each, schema in docs/schemas/<kind>.schema.json, generated from the kind's declaration in
# geosched.files.decl.
DOCUMENTS = ("Placement", "NoFit", "SimulationReport", "ProbeRun", "ProvisionPlan", "ProvisionResult", "GangStatus",
             "SubmitOutcome", "CostReport", "CarbonReport")
