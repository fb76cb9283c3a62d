"""The adversarial tester's findings of 2026-12-07, fourth round (/work/lanes/attack4/REPORT.md), each reproduced
through the command a user runs."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from geosched.core.errors import EXIT_BAD_INPUT
from tests.inputs.inputs_support import in_process

# --- --out naming something that is not a file ----------------------------------------------------------------

# `--out /dev/null` (discard the output, as a CI step that only checks a command runs does) and `--out /dev/stdout`
# are how people say "nowhere" and "here" to tools that take a file name. A write is a temp file renamed over its
# target, so as root (CI containers) `report cost -o csv --out /dev/full` replaced the machine's /dev/full with an
# empty regular file and said "wrote /dev/full". The tests make their own device, FIFO and links in tmp_path.


def _report(tmp_path: Path, out: Path) -> tuple[int | str, str, str]:
    run = in_process(["report", "cost", "-o", "csv", "--out", out], home=tmp_path / "home")
    return run.code, run.stdout, run.stderr


def test_a_fifo_at_out_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code, stdout, stderr = _report(tmp_path, fifo)
    assert code == EXIT_BAD_INPUT, (code, stderr)
    assert stderr == (f"error: {fifo}: a FIFO, not a file: geosched writes a file whole (a temp file renamed over "
                      "it), which would replace it; name a file\n")
    assert stdout == "" and stat.S_ISFIFO(fifo.lstat().st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node takes root")
def test_a_device_at_out_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    null = tmp_path / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's numbers
    code, _, stderr = _report(tmp_path, null)
    assert code == EXIT_BAD_INPUT, (code, stderr)
    assert f"{null}: a device, not a file" in stderr
    assert stat.S_ISCHR(null.lstat().st_mode) and null.lstat().st_rdev == os.makedev(1, 3)


@pytest.mark.parametrize("to", ["/dev/null", "/proc/self/fd/1"], ids=["device", "descriptor"])
def test_a_link_to_a_device_or_a_descriptor_is_refused_and_left_as_it_is(tmp_path: Path, to: str) -> None:
    # /dev/stdout is a link to /proc/self/fd/1 (whatever fd 1 is: a pipe, a terminal, or a file when redirected).
    link = tmp_path / "stdout"
    link.symlink_to(to)
    code, _, stderr = _report(tmp_path, link)
    assert code == EXIT_BAD_INPUT, (code, stderr)
    assert f"{link}: a link to " in stderr and ", not a file" in stderr
    assert link.is_symlink() and os.readlink(link) == to


def test_a_link_to_a_file_is_still_replaced_and_a_file_written(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.csv"
    target.write_text("keep me", encoding="utf-8")
    link = tmp_path / "report.csv"
    link.symlink_to(target)
    code, stdout, stderr = _report(tmp_path, link)
    assert code == 0, stderr
    assert stdout == f"wrote {link}\n"
    assert not link.is_symlink() and target.read_text(encoding="utf-8") == "keep me"
    fresh = tmp_path / "new.csv"
    assert _report(tmp_path, fresh)[0] == 0 and fresh.is_file()


# --- a JobSet's replicated job that sets neither completions nor parallelism ----------------------------------

# kubernetes-sigs/jobset site/static/examples/depends-on/depends-on.yaml (commit 08dfbdfd): the initializer and
# the launcher set neither field, which batch/v1 defaults to 1 and 1 (SetDefaults_Job) after JobSet defaults the
# completionMode to Indexed; here the workers ask for GPUs, as a training JobSet's do.
DEPENDS_ON = """\
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: depends-on
spec:
  replicatedJobs:
    - name: initializer
      template:
        spec:
          template:
            spec:
              containers:
                - name: initializer
                  image: busybox
                  command: [/bin/sh, -c, "echo 'initializer runs for 10 seconds' && sleep 10"]
    - name: launcher
      dependsOn:
        - name: initializer
          status: Complete
      template:
        spec:
          template:
            spec:
              containers:
                - name: launcher
                  image: busybox
                  command: [/bin/sh, -c, "echo 'launcher runs for 20 seconds' && sleep 20"]
    - name: worker
      dependsOn:
        - name: launcher
          status: Ready
      template:
        spec:
          parallelism: 4
          completions: 4
          template:
            spec:
              containers:
                - name: worker
                  image: busybox
                  command: [/bin/sh, -c, "echo 'worker runs for 20 seconds' && sleep 20"]
                  resources:
                    limits:
                      nvidia.com/gpu: 8
"""


def test_a_replicated_job_without_completions_or_parallelism_is_one_pod(tmp_path: Path) -> None:
    # It was refused: "completions: required with completionMode: Indexed", of a file the API server takes.
    from geosched.kube.jobinput import read_job_file

    path = tmp_path / "depends-on.yaml"
    path.write_text(DEPENDS_ON, encoding="utf-8")
    job = read_job_file(path)
    assert [p.pods for p in job.pod_sets] == [1, 1, 4]
    assert (job.job.workers, job.job.gpus_per_worker) == (4, 8)
    # Parallelism without completions is still refused: the API server refuses it for an Indexed Job.
    path.write_text(DEPENDS_ON.replace("          parallelism: 4\n          completions: 4\n",
                                       "          parallelism: 4\n"), encoding="utf-8")
    from geosched.core.errors import InputError
    with pytest.raises(InputError, match=r"replicatedJobs\[2\].template.spec.completions: required"):
        read_job_file(path)


# --- a gang name taken already ---------------------------------------------------------------------------------

def test_every_path_that_creates_a_gang_refuses_a_name_taken_already(tmp_path: Path) -> None:
    # `up --provisioning-class --name G` forgot the check the node-group and machine paths made: the insert's
    # IntegrityError was a traceback (tests/providers/test_provreq_failover.py runs that path). The check is now the
    # insert's own, for every path.
    from geosched.core.errors import InputError
    from geosched.providers import journal
    from geosched.store.db import Store

    with Store(tmp_path / "home") as store:
        first = journal.create_gang(store, "g1", journal.owner(store), None)
        with pytest.raises(InputError, match=r"^--name: gang 'g1' exists already in "):
            journal.create_gang(store, "g1", journal.owner(store), None)
        assert journal.gang_record(store, "g1") == first


# --- a cluster config's queue that no Kubernetes object can be named ---------------------------------------------

@pytest.mark.parametrize(("field", "old", "new"), [
    # The queue's display name where its object's name goes: rendered as the kueue.x-k8s.io/queue-name label's
    # value, which the API server refuses ("Team A" is no label value), after `gitops check` passed in CI.
    ("queue", "queue: team-a", "queue: Team A"),
    ("queue", "queue: team-a", "queue: " + "q" * 64),  # a label value holds at most 63 characters
    ("scheduler_name", "namespace: ml\n", "namespace: ml\n    scheduler_name: My Scheduler\n"),
], ids=["display-name", "too-long", "scheduler"])
def test_a_queue_or_scheduler_name_no_object_can_have_is_refused_when_the_cluster_config_is_read(
        tmp_path: Path, field: str, old: str, new: str) -> None:
    import shutil

    from tests.inputs.inputs_support import ROOT

    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "gitops", repo)
    clusters = repo / "clusters.yaml"
    clusters.write_text(clusters.read_text(encoding="utf-8").replace(old, new, 1), encoding="utf-8")
    before = {p: p.read_bytes() for p in (repo / "clusters").rglob("*.yaml")}
    run = in_process(["gitops", "render", "--jobs", repo / "jobs", "--snapshot", repo / "snapshot", "--clusters",
                      clusters, "--out", repo], home=tmp_path / "home")
    assert run.code == EXIT_BAD_INPUT, (run.code, run.stdout, run.stderr)
    assert run.one_line_error and f"{clusters}: clusters.eks-us-east-1.{field}: " in run.stderr, run.stderr
    assert {p: p.read_bytes() for p in (repo / "clusters").rglob("*.yaml")} == before
