"""The `geosched` command, run as a real process: outputs, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from geosched.providers import journal
from geosched.report import intervals
from geosched.store.db import Store

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"
JOBS = ROOT / "examples" / "jobs"


def geosched(*args: str | Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GEOSCHED_HOME": str(home), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "geosched", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_is_the_installed_distributions(flag: str, tmp_path: Path) -> None:
    run = geosched(flag, home=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"geosched {metadata.version('geosched')}\n"


def test_place_on_the_embedded_default_gives_the_documented_json(tmp_path: Path) -> None:
    run = geosched("place", JOBS / "train-64.yaml", "-o", "json", home=tmp_path)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert {"job", "policy", "cluster", "zones", "nodes", "score", "rejected"} <= set(doc)
    assert doc["policy"] == "zone-first" and len(doc["zones"]) == 1
    assert sum(n["workers"] for n in doc["nodes"]) == 8
    assert all(n["zone"] == doc["zones"][0] for n in doc["nodes"])
    assert {"network", "cost", "carbon", "total"} <= set(doc["score"])
    assert doc["rejected"]


def test_place_yaml_and_explain(tmp_path: Path) -> None:
    run = geosched("place", JOBS / "train-512.yaml", "-o", "yaml", home=tmp_path)
    assert run.returncode == 0
    doc = yaml.safe_load(run.stdout)
    assert len(doc["regions"]) == 1 and len(doc["zones"]) >= 2
    explained = geosched("place", JOBS / "train-64.yaml", "--explain", home=tmp_path)
    assert explained.returncode == 0
    assert "candidates (chosen first)" in explained.stdout and "rejected" in explained.stdout


def test_weights_change_the_decision(tmp_path: Path) -> None:
    def zones(*extra: str) -> list[str]:
        run = geosched("place", JOBS / "train-8.yaml", "-o", "json", *extra, home=tmp_path)
        return json.loads(run.stdout)["zones"]

    green = zones("--carbon-weight", "5")
    assert green != zones("--cost-weight", "1")
    assert green[0].startswith("us-west1")  # Oregon's grid is the cleanest with free A100 nodes


def test_place_on_files_and_on_a_snapshot(tmp_path: Path) -> None:
    run = geosched("place", DATA / "good" / "job.yaml", "--fleet", DATA / "good" / "fleet.yaml",
                   "--network", DATA / "good" / "network.yaml", "-o", "json", home=tmp_path)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["cluster"] == "hpc" and doc["zones"] == ["zrh-hall-a"]
    exported = geosched("snapshot", "export", "--embedded", tmp_path / "snap", home=tmp_path)
    assert exported.returncode == 0
    from_snapshot = geosched("place", JOBS / "train-64.yaml", "--snapshot", tmp_path / "snap", "-o", "json",
                             home=tmp_path)
    embedded = geosched("place", JOBS / "train-64.yaml", "-o", "json", home=tmp_path)
    assert json.loads(from_snapshot.stdout)["nodes"] == json.loads(embedded.stdout)["nodes"]


def test_place_says_which_gpu_fleet_and_network_it_used(tmp_path: Path) -> None:
    embedded = geosched("place", JOBS / "train-8.yaml", home=tmp_path)
    assert embedded.returncode == 0, embedded.stderr
    line = next(ln for ln in embedded.stdout.splitlines() if ln.startswith("inputs:"))
    from geosched.core.default_fleet import default_fleet

    assert "GPU A100" in line and "embedded default" in line, line
    assert f"{len(default_fleet().nodes):,} nodes" in line, line
    fleet = DATA / "good" / "fleet.yaml"
    files = geosched("place", DATA / "good" / "job.yaml", "--fleet", fleet, home=tmp_path)
    assert files.returncode == 0, files.stderr
    line = next(ln for ln in files.stdout.splitlines() if ln.startswith("inputs:"))
    assert f"{fleet} + shipped network model" in line, line


def test_no_fit_exits_3_with_the_reason(tmp_path: Path) -> None:
    job = tmp_path / "huge.yaml"
    job.write_text("name: huge\nworkers: 999\ngpus_per_worker: 8\ngpu: A100\n")
    run = geosched("place", job, home=tmp_path)
    assert run.returncode == 3
    assert run.stderr.startswith("error: no fit for job 'huge'") and "holds" in run.stderr
    as_json = geosched("place", job, "-o", "json", home=tmp_path)
    assert as_json.returncode == 3 and json.loads(as_json.stdout)["error"] == "NoFit"


@pytest.mark.parametrize("path", sorted((DATA / "bad").glob("*.yaml")), ids=lambda p: p.name)
def test_bad_input_exits_2_with_one_line_and_no_traceback(path: Path, tmp_path: Path) -> None:
    kind = path.name.split("-")[0]
    good = DATA / "good"
    args: list[str | Path] = {
        "job": ["place", path],
        "fleet": ["place", good / "job.yaml", "--fleet", path],
        "network": ["place", good / "job.yaml", "--fleet", good / "fleet.yaml", "--network", path],
    }[kind]
    run = geosched(*args, home=tmp_path)
    assert run.returncode == 2
    assert run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: ")
    assert "Traceback" not in run.stderr


def test_unknown_policy_and_missing_file(tmp_path: Path) -> None:
    run = geosched("place", JOBS / "train-8.yaml", "--policy", "magic", home=tmp_path)
    assert run.returncode == 2 and "unknown policy 'magic'" in run.stderr
    missing = geosched("place", tmp_path / "nope.yaml", home=tmp_path)
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_catalog_outputs(tmp_path: Path) -> None:
    run = geosched("catalog", "--gpu", "A100:8", "--sort", "price", "-o", "json", home=tmp_path)
    rows = json.loads(run.stdout)["items"]
    assert rows and all(r["gpu"] == "A100" and r["gpus"] == 8 for r in rows)
    csv_out = geosched("catalog", "--provider", "gcp", "--gpu", "L4", "-o", "csv", home=tmp_path)
    assert csv_out.stdout.splitlines()[0].startswith("provider,region,zone,instance_type,gpu")
    table = geosched("catalog", "--gpu", "H100", "--sort", "carbon", home=tmp_path)
    assert "GPU offerings" in table.stdout
    bad = geosched("catalog", "--sort", "speed", home=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --sort")


def test_demo_runs_end_to_end_and_records(tmp_path: Path) -> None:
    run = geosched("demo", home=tmp_path)
    assert run.returncode == 0, run.stderr
    text = " ".join(run.stdout.split())
    stages = ("1. Fleet", "2. Network", "3. Placement", "4. Hand-off", "5. Provisioning on emulated clouds",
              "6. Trace replay", "7. Recorded", "8. Cost and carbon")
    at = [text.index(stage) for stage in stages]
    assert at == sorted(at) and "Not in this demo yet" not in text
    manifests = sorted((tmp_path / "demo" / "manifests").rglob("*.yaml"))
    assert sorted(m.name for m in manifests) == ["finetune-8.yaml", "pretrain-512.yaml", "pretrain-64.yaml"]
    assert all("kueue.x-k8s.io/queue-name: training" in m.read_text() for m in manifests)
    # The demo's placements go to its own store; the user's store is never opened (issue 14).
    assert not (tmp_path / "geosched.db").exists()
    listed = geosched("placements", "-o", "json", home=tmp_path / "demo" / "store")
    placed = {"finetune-8", "pretrain-64", "pretrain-512"}
    assert {r["job"] for r in json.loads(listed.stdout)["items"]} == placed
    # Provisioning: said where it runs, injected one fault, launched a gang elsewhere, took it down to nothing.
    assert "127.0.0.1, no cloud account" in text and "injected fault" in text
    assert "emulated clouds hold 0 live instance(s)" in text
    demo_home = tmp_path / "demo" / "store"
    with Store(demo_home) as demo:
        (gang,) = journal.gangs(demo)
        attempts = journal.attempts(demo, gang.gang)
        machines = journal.instances(demo, gang=gang.gang)
    assert gang.state == "terminated" and [a.outcome for a in attempts] == ["failed", "launched"]
    assert attempts[0].error_kind == "capacity"
    assert len([m for m in machines if m.provider_id]) == 8 and {m.state for m in machines} == {"terminated"}
    # Cost and carbon, from the demo store: the three jobs and the gang, each costed; the HTML written.
    assert "assumed 1 h each" in text and "nothing ran" in text
    report = geosched("report", "cost", "--by", "job", "--until", "2100-01-01", "-o", "json", home=demo_home)
    assert report.returncode == 0, report.stderr
    rows = {r["job"]: r for r in json.loads(report.stdout)["rows"]}
    assert set(rows) == placed | {gang.gang}
    assert all(r["cost_usd"] > 0 for r in rows.values())
    assert rows["pretrain-64"]["gpu_hours"] == pytest.approx(64.0) and rows[gang.gang]["gpu_hours"] < 1.0
    page = tmp_path / "demo" / "report.html"
    assert str(page) in text and all(job in page.read_text() for job in placed)
    # The user's own store holds no emulated machines and no assumed usage.
    with Store(tmp_path) as own:
        assert journal.gangs(own) == [] and intervals(own) == []


@pytest.mark.parametrize(("name", "workers"), [("pytorchjob", 4), ("trainjob", 4), ("multi-doc", 4)])
def test_place_reads_the_kubernetes_manifests_submit_and_gitops_read(name: str, workers: int, tmp_path: Path) -> None:
    """Issue 21 item 11: `place` read only the compact form and refused a batch Job with `metadata: unknown field`;
    every command that reads a job reads the same kinds (geosched.kube.jobinput)."""
    run = geosched("place", ROOT / "tests" / "kube" / "data" / f"{name}.yaml", "-o", "json", home=tmp_path)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert sum(n["workers"] for n in doc["nodes"]) == workers


@pytest.mark.parametrize("name", ["batch-job", "jobset"])
def test_place_reads_a_manifests_gpu_model_from_its_node_selector(name: str, tmp_path: Path) -> None:
    # Both pin nvidia.com/gpu.product NVIDIA-A100-SXM4-80GB, of which the embedded fleet has too few free nodes.
    run = geosched("place", ROOT / "tests" / "kube" / "data" / f"{name}.yaml", "-o", "json", home=tmp_path)
    assert run.returncode == 3, run.stderr
    assert "8 free A100-80GB" in json.loads(run.stdout)["rejected"][0]["reason"]


def test_place_names_the_supported_kinds_for_an_unknown_object(tmp_path: Path) -> None:
    job = tmp_path / "deploy.yaml"
    job.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {}\n")
    run = geosched("place", job, home=tmp_path)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and "batch/v1 Job" in run.stderr and "unknown field" not in run.stderr


def test_place_takes_eks_zone_names_the_fleets_nodes_map(tmp_path: Path) -> None:
    """Issue 21 item 10: `zones: [us-east-1a]`, what every EKS user types, gave a 579-character no-fit; the embedded
    fleet's EKS nodes say which zone ID that name is (topology.k8s.aws/zone-id beside topology.kubernetes.io/zone)."""
    job = tmp_path / "named.yaml"
    job.write_text("name: named\nworkers: 2\ngpus_per_worker: 8\nzones: [us-east-1a]\n")
    run = geosched("place", job, "-o", "json", home=tmp_path)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["zones"] == ["use1-az6"]  # us-east-1a in the embedded fleet's example account
    assert doc["job"] == "named"


@pytest.mark.parametrize(("zone", "says"), [
    ("us-east-1z", "AWS zones are keyed by zone ID"),
    ("us-east-9a", "AWS zones are keyed by zone ID"),
    ("europe-west9-q", "not a zone of this fleet"),
])
def test_place_says_in_one_line_which_zones_exist(zone: str, says: str, tmp_path: Path) -> None:
    job = tmp_path / "named.yaml"
    job.write_text(f"name: named\nworkers: 2\ngpus_per_worker: 8\nzones: [{zone}]\n")
    run = geosched("place", job, home=tmp_path)
    assert run.returncode == 3
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and len(lines[0]) < 400, lines
    if zone == "us-east-1z":
        assert "use1-az1, use1-az2, use1-az4, use1-az6" in lines[0]


def test_place_maps_zone_names_from_the_nodes_only(tmp_path: Path) -> None:
    """docs/design.md, "AWS zone names in job files": `place` maps a zone name to its ID from the fleet's nodes'
    labels, and from nothing else: no AWS call (credentials and an endpoint are offered, a server that records
    every request stands behind it and sees none). A snapshot whose nodes say the pairing places `us-east-1a`; the
    same snapshot without the nodes' zone labels says in one line that AWS zones are keyed by ID."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    asked: list[str] = []

    class Recorder(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # EC2's query API is POST (DescribeAvailabilityZones among it)
            asked.append(self.path)
            self.send_error(500)

        do_GET = do_POST

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # AWS's documented example key pair (docs.aws.amazon.com/IAM/latest/UserGuide/security-creds.html).
    env = {**os.environ, "GEOSCHED_HOME": str(tmp_path),
           "AWS_ENDPOINT_URL": f"http://127.0.0.1:{server.server_port}", "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
           "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true"}

    def place(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "geosched", "place", *map(str, args)], capture_output=True,
                              text=True, env=env, timeout=120)

    try:
        labelled = tmp_path / "snap"
        export = subprocess.run([sys.executable, "-m", "geosched", "snapshot", "export", "--embedded", str(labelled)],
                                capture_output=True, text=True, env=env, timeout=120)
        assert export.returncode == 0, export.stderr
        job = tmp_path / "named.yaml"
        job.write_text("name: named\nworkers: 2\ngpus_per_worker: 8\ngpu: H100\nzones: [us-east-1a]\n")
        mapped = place(job, "--snapshot", labelled, "-o", "json")
        assert mapped.returncode == 0, mapped.stderr
        assert json.loads(mapped.stdout)["zones"] == ["use1-az6"]  # what the nodes labelled us-east-1a say

        bare = tmp_path / "bare"
        bare.mkdir()
        (bare / "network.yaml").write_text((labelled / "network.yaml").read_text())
        fleet = yaml.safe_load((labelled / "fleet.yaml").read_text())
        nodes = fleet["nodes"] if isinstance(fleet, dict) else fleet
        for node in nodes:
            for key in ("topology.kubernetes.io/zone", "topology.k8s.aws/zone-id"):
                (node.get("labels") or {}).pop(key, None)
        (bare / "fleet.yaml").write_text(yaml.safe_dump(fleet))
        unmapped = place(job, "--snapshot", bare)
        assert unmapped.returncode == 3, unmapped.stderr
        [line] = unmapped.stderr.strip().splitlines()
        assert "zone us-east-1a: AWS zones are keyed by zone ID" in line
        assert "IDs in us-east-1: use1-az1, use1-az2, use1-az4, use1-az6" in line
    finally:
        server.shutdown()
        server.server_close()
    assert asked == []


def test_place_says_an_unknown_region_in_one_line(tmp_path: Path) -> None:
    job = tmp_path / "r.yaml"
    job.write_text("name: r\nworkers: 2\ngpus_per_worker: 8\nregions: [us-east-9]\n")
    run = geosched("place", job, home=tmp_path)
    assert run.returncode == 3
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "region us-east-9 is not a region of this fleet" in lines[0] and len(lines[0]) < 400
