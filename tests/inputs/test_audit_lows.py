"""The audit's three low findings (13, 14, 15), each reproduced through the command a user runs: a cluster setting's
mistake named where it is (the ClusterConfig file and field, not the kubeconfig), one check of Kubernetes names for
every reader (`place` accepted a namespace `gitops render` refused), and a settings error that describes a
wrong-typed value instead of printing it (it may hold a password)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.inputs.inputs_support import ROOT, in_process

JOB = ROOT / "examples" / "jobs" / "train-8.yaml"
GITOPS = ROOT / "examples" / "gitops"
SECRET = "SUPERSECRETpw-8f3a1c"

# The shape kubectl writes (`kubectl config view --raw`): one cluster, one context, one user. Nothing listens on
# the server: every refusal below comes before a connection.
KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster: {server: "https://127.0.0.1:9"}
contexts:
- name: gke_proj_europe-west4_eu
  context: {cluster: c1, user: u1}
users:
- name: u1
  user: {token: abc}
current-context: gke_proj_europe-west4_eu
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- finding 13: a cluster setting's mistake names the cluster config's file and field -------------------------


@pytest.mark.parametrize(("settings", "field", "verb"), [
    # A typo in the context: the cluster config chose the name.
    ("context: gke_proj_europe-west4_ue", "clusters.gke-eu.context", "jobs"),
    # No context given: the default, the cluster's name, is not in the kubeconfig either.
    ("backend: none", "clusters.gke-eu.context", "jobs"),
    # The Karmada control plane's context, where submit applies the job.
    ("context: gke_proj_europe-west4_eu\n    karmada: true\n    karmada_context: karmada-apiserver",
     "clusters.gke-eu.karmada_context", "submit"),
], ids=["typo", "default", "karmada"])
def test_a_context_the_kubeconfig_lacks_is_named_as_the_cluster_configs_field(
        tmp_path: Path, settings: str, field: str, verb: str) -> None:
    kubeconfig = _write(tmp_path, "kubeconfig", KUBECONFIG)
    clusters = _write(tmp_path, "clusters.yaml", f"clusters:\n  gke-eu:\n    {settings}\n")
    args = ["jobs"] if verb == "jobs" else ["submit", str(JOB), "--dry-run"]
    run = in_process([*args, "--kubeconfig", kubeconfig, "--clusters", clusters], home=tmp_path / "home")
    assert run.one_line_error, (run.code, run.stderr)
    assert run.stderr.startswith(f"error: {clusters}: {field}: context "), run.stderr
    # ... and says which kubeconfig it looked in, and what that one has.
    assert f"is not in the kubeconfig {kubeconfig} (its contexts: gke_proj_europe-west4_eu)" in run.stderr
    if "default" in run.stderr:
        assert "'gke-eu' (the default: the cluster's name)" in run.stderr


# --- finding 14: one check of Kubernetes names for every reader ------------------------------------------------

# Each refused by the API server (apimachinery IsDNS1123Label) and by `gitops render`; "ml\n" passed the old
# check, whose `$` also matches before a final line break.
BAD_NAMESPACES = ["Team_A", "ml\n", "-ml", "a" * 64]


@pytest.mark.parametrize("namespace", BAD_NAMESPACES, ids=["upper", "newline", "dash", "long"])
@pytest.mark.parametrize("kind", ["compact", "batch"])
def test_place_refuses_a_namespace_gitops_refuses(tmp_path: Path, namespace: str, kind: str) -> None:
    quoted = namespace.replace("\n", "\\n")
    if kind == "compact":
        text = f'name: train\nnamespace: "{quoted}"\nworkers: 1\ngpus_per_worker: 8\ngpu: H100\n'
        field = "namespace"
    else:  # a batch/v1 Job, as `kubectl create job --dry-run=client -o yaml` writes one
        text = (f'apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: train\n  namespace: "{quoted}"\nspec:\n'
                "  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: main\n"
                "        image: busybox\n        resources:\n          limits: {nvidia.com/gpu: 8}\n")
        field = "metadata.namespace"
    job = _write(tmp_path, "job.yaml", text)
    place = in_process(["place", job], home=tmp_path / "home")
    assert place.one_line_error, (place.code, place.stderr)
    assert f"{job}: {field}: must be a lowercase RFC 1123 label" in place.stderr

    # The same file in a GitOps repository: the same refusal, in the same words.
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "job.yaml").write_text(text, encoding="utf-8")
    render = in_process(["gitops", "render", "--jobs", jobs, "--snapshot", GITOPS / "snapshot", "--clusters",
                         GITOPS / "clusters.yaml", "--out", tmp_path / "out"], home=tmp_path / "home")
    assert render.one_line_error, (render.code, render.stderr)
    assert f"{field}: must be a lowercase RFC 1123 label" in render.stderr


@pytest.mark.parametrize("namespace", BAD_NAMESPACES, ids=["upper", "newline", "dash", "long"])
def test_a_cluster_configs_namespace_is_checked_when_read(tmp_path: Path, namespace: str) -> None:
    quoted = namespace.replace("\n", "\\n")
    kubeconfig = _write(tmp_path, "kubeconfig", KUBECONFIG)
    clusters = _write(tmp_path, "clusters.yaml", f'clusters:\n  gke-eu:\n    context: gke_proj_europe-west4_eu\n'
                      f'    namespace: "{quoted}"\n')
    run = in_process(["submit", JOB, "--dry-run", "--kubeconfig", kubeconfig, "--clusters", clusters],
                     home=tmp_path / "home")
    assert run.one_line_error, (run.code, run.stderr)
    assert f"{clusters}: clusters.gke-eu.namespace: must be a lowercase RFC 1123 label" in run.stderr


def test_a_job_name_with_a_final_line_break_is_refused(tmp_path: Path) -> None:
    job = _write(tmp_path, "job.yaml", 'name: "train\\n"\nworkers: 1\ngpus_per_worker: 8\n')
    run = in_process(["place", job], home=tmp_path / "home")
    assert run.one_line_error, (run.code, run.stderr)
    assert f"{job}: name: must be a lowercase RFC 1123 label" in run.stderr


def test_a_valid_namespace_is_still_placed(tmp_path: Path) -> None:
    job = _write(tmp_path, "job.yaml", "name: train\nnamespace: team-a\nworkers: 1\ngpus_per_worker: 8\n")
    run = in_process(["place", job, "-o", "json"], home=tmp_path / "home")
    assert run.code == 0, run.stderr


# --- finding 15: a wrong-typed value is described, never printed ------------------------------------------------


@pytest.mark.parametrize(("config", "needle"), [
    (f"gcp:\n  endpoint:\n    user: bob\n    password: {SECRET}\n", "gcp.endpoint: expected a non-empty string, "
     "got a mapping"),
    (f"weights:\n  cost: {{key: {SECRET}}}\n", "weights.cost: expected a number, got a mapping"),
    (f"output: [{SECRET}]\n", "output: expected a non-empty string, got a list"),
    (f"gcp: {SECRET}\n", f"gcp: expected a mapping of gcp.* settings, got a string of {len(SECRET)} characters"),
    (f"gcp:\n  public_ips: {{k: {SECRET}}}\n", "gcp.public_ips: expected a non-empty string, got a mapping"),
    (f"providers: [{{k: {SECRET}}}]\n", "providers: expected a non-empty string, got a mapping"),
], ids=["text", "weight", "choice", "group", "flag", "names"])
def test_a_settings_file_value_of_the_wrong_type_is_described_not_printed(
        tmp_path: Path, config: str, needle: str) -> None:
    path = _write(tmp_path, "config.yaml", config)
    run = in_process(["place", JOB], home=tmp_path / "home", env={"GEOSCHED_CONFIG": str(path)})
    assert run.one_line_error, (run.code, run.stderr)
    assert f"{path}: {needle}" in run.stderr
    assert SECRET not in run.stderr + run.stdout


@pytest.mark.parametrize("document", [
    # A job's choice.
    ("job.yaml", f"name: train\nworkers: 1\ngpus_per_worker: 8\npricing: {{k: {SECRET}}}\n",
     "pricing: expected one of on-demand, spot, got a mapping"),
    # A cluster config: a boolean, a choice and its header.
    ("clusters.yaml", f"clusters:\n  eu:\n    karmada: {{token: {SECRET}}}\n",
     "clusters.eu.karmada: expected true or false, got a mapping"),
    ("clusters.yaml", f"clusters:\n  eu:\n    backend: [{SECRET}]\n",
     "clusters.eu.backend: expected one of kueue, coscheduling, volcano, workload-api, none, got a list"),
    ("clusters.yaml", f"apiVersion: {{k: {SECRET}}}\nclusters:\n  eu: {{}}\n",
     "apiVersion: expected 'geosched.io/v1alpha1', got a mapping"),
], ids=["choice", "bool", "cluster-choice", "settings-apiVersion"])
def test_a_documents_value_of_the_wrong_type_is_described_not_printed(
        tmp_path: Path, document: tuple[str, str, str]) -> None:
    name, text, needle = document
    path = _write(tmp_path, name, text)
    args = ["place", path] if name == "job.yaml" else ["jobs", "--clusters", path, "--kubeconfig",
                                                         _write(tmp_path, "kubeconfig", KUBECONFIG)]
    run = in_process(args, home=tmp_path / "home")
    assert run.one_line_error, (run.code, run.stderr)
    assert f"{path}: {needle}" in run.stderr
    assert SECRET not in run.stderr + run.stdout


def test_a_bad_input_limit_in_a_variable_is_described(tmp_path: Path) -> None:
    run = in_process(["place", JOB], home=tmp_path / "home", env={"GEOSCHED_INPUT_LIMITS": f"trace={SECRET}"})
    assert run.one_line_error, (run.code, run.stderr)
    assert "expected a whole number of MiB (1..1048576), got a string (" in run.stderr
