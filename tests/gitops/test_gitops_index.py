"""placements.yaml is declared once (geosched.gitops.index.PlacementIndexDoc; issue 25 item 6): what `gitops render`
writes validates against its generated schema and is the bytes main wrote before the declaration, an index main
wrote reads back whole, and a planted index that is not one is one line naming the file, the field and the reason
(the repository is untrusted: docs/security.md). Real renders, real files, the real CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
import yaml
from gitops_support import AT, ROOT, init_repo, tree_args

from geosched.cli.schemas import schema_files
from geosched.core.errors import InputError
from geosched.gitops.index import INDEX, PlacementIndexDoc, index_text, parse_index, placed_jobs, read_index
from geosched.policies.stable import Current
from tests.inputs.inputs_support import geosched

# Written by main at dc5fe64 (the last hand-written parser): `geosched gitops render` of examples/gitops's inputs
# into an empty tree (tests/data/compat/README.md). Four jobs placed, one on a single node (null score terms), and
# one unplaced with more than ten reasons (the "... and 1 more" line).
MAIN_INDEX = ROOT / "tests" / "data" / "compat" / "placements-dc5fe64.yaml"
EXAMPLE = ROOT / "examples" / "gitops"


def schema() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(schema_files()["PlacementIndex.schema.json"]))


def test_an_index_main_wrote_reads_back_whole_and_is_written_again_byte_for_byte() -> None:
    text = MAIN_INDEX.read_text(encoding="utf-8")
    doc = PlacementIndexDoc.read(yaml.safe_load(text), str(MAIN_INDEX))
    assert index_text(doc) == text
    index = read_index(text, str(MAIN_INDEX))
    assert sorted(index.inputs) == ["clusters", "config", "fleet", "network"]
    sweep = index.entries["vision/resnet-sweep"]  # one node: no hop bounds its step
    assert sweep.placed_at == "2025-03-01T12:00:00Z"
    assert sweep.file == "clusters/gke-europe-west4/vision/resnet-sweep.yaml"
    assert sweep.score["min_throughput_gbps"] is None and sweep.score["bounding_hop"] is None
    assert index.before()["vision/resnet-sweep"] == Current("gke-europe-west4", ("europe-west4-b",),
                                                             (("gcp-europe-west4-b-a2-00", 2),), 4)
    assert index.before()["research/llm-pretrain"].nodes == tuple((f"aws-use1-az2-p5-0{i}", 1) for i in range(4))
    giant = index.entries["research/giant"]
    assert giant.cluster is None and len(giant.reasons) == 11 and giant.reasons[-1] == "... and 1 more"
    assert placed_jobs(MAIN_INDEX) == {"eks-us-east-1": {("research", "llm-pretrain")},
                                       "gke-europe-west4": {("nlp", "bert-finetune"), ("research", "diffusion"),
                                                            ("vision", "resnet-sweep")}}


def test_rendering_the_same_inputs_writes_the_bytes_main_wrote_and_they_fit_the_schema(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("clusters", INDEX))
    run = geosched("gitops", "render", "--jobs", repo / "jobs", "--snapshot", repo / "snapshot", "--clusters",
                   repo / "clusters.yaml", "--config", repo / "gitops.yaml", "--out", repo, "--at", AT,
                   home=tmp_path / "home")
    assert run.code == 0, run.stderr
    written = (repo / INDEX).read_text(encoding="utf-8")
    assert written == MAIN_INDEX.read_text(encoding="utf-8")
    validator = schema()
    assert not [e.message for e in validator.iter_errors(yaml.safe_load(written))]


def test_the_schema_refuses_what_the_declaration_refuses(tmp_path: Path) -> None:
    init_repo(tmp_path / "repo")
    run = geosched("gitops", "render", *tree_args(tmp_path / "repo"), "--at", AT, home=tmp_path / "home")
    assert run.code == 0, run.stderr
    doc = yaml.safe_load((tmp_path / "repo" / INDEX).read_text(encoding="utf-8"))
    validator = schema()
    assert not list(validator.iter_errors(doc))
    entry = doc["placed"]["ml/alpha"]
    for key, bad in (("assignments", ["east-a-1"]), ("placed_at", "yesterday"), ("gpus_per_worker", 0),
                     ("decision_sha256", "abc"), ("surplus", 1)):
        damaged = {**doc, "placed": {**doc["placed"], "ml/alpha": {**entry, key: bad}}}
        assert list(validator.iter_errors(damaged)), key
        with pytest.raises(InputError, match=rf"^x\.yaml: placed\.ml/alpha\.{key}"):
            PlacementIndexDoc.read(damaged, "x.yaml")


# What a pull request could plant in placements.yaml, and the line that names the fault.
PLANTED = {
    "node without workers": (lambda t: t.replace("=1\n", "\n", 1),
                             "placed.nlp/bert-finetune.assignments[0]: expected node=workers, got a string"),
    "workers as text": (lambda t: t.replace("gpus_per_worker: 8", "gpus_per_worker: '8'", 1),
                        "placed.nlp/bert-finetune.gpus_per_worker: expected an integer, got a string ('8')"),
    "a Kubernetes object": (lambda t: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
                            "kind: not a PlacementIndex written by `geosched gitops render` (kind is a string"),
    "a list": (lambda t: "- 1\n- 2\n", "(document): expected a mapping, got a list"),
}


@pytest.mark.parametrize("damage", sorted(PLANTED))
def test_a_planted_index_is_one_line_exit_2_for_snapshot_export(tmp_path: Path, damage: str) -> None:
    change, line = PLANTED[damage]
    planted = tmp_path / INDEX
    planted.write_text(change(MAIN_INDEX.read_text(encoding="utf-8")), encoding="utf-8")
    run = geosched("snapshot", "export", tmp_path / "out", "--from-clusters", "--placements", planted,
                   home=tmp_path / "home")
    assert run.code == 2 and run.one_line_error and not run.traceback, (run.code, run.stderr)
    assert f"{planted}: {line}" in run.stderr
    assert not (tmp_path / "out").exists()


def test_an_index_past_its_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    planted = tmp_path / INDEX
    with planted.open("wb") as f:  # sparse: a reader that read it first would take 3 GiB
        f.truncate(3 << 30)
    run = geosched("snapshot", "export", tmp_path / "out", "--from-clusters", "--placements", planted,
                   home=tmp_path / "home", env={"GEOSCHED_INPUT_LIMITS": "index=1"})
    assert run.code == 2 and run.one_line_error and not run.traceback, (run.code, run.stderr)
    assert str(planted) in run.stderr and "MiB" in run.stderr


def test_a_render_over_a_damaged_index_says_so(tmp_path: Path) -> None:
    """Before, the index was dropped in silence: a pull request that damaged it moved jobs with no word why."""
    repo = tmp_path / "repo"
    init_repo(repo)
    assert geosched("gitops", "render", *tree_args(repo), "--at", AT, home=tmp_path / "home").code == 0
    text = (repo / INDEX).read_text(encoding="utf-8")
    (repo / INDEX).write_text(text.replace("gpus_per_worker: 8", "gpus_per_worker: many", 1), encoding="utf-8")
    assert "\n  beta:\n" in text.split("gpus_per_worker: 8")[0]  # the first placed job, by key
    check = geosched("gitops", "check", *tree_args(repo), home=tmp_path / "home")
    assert check.code == 1 and not check.traceback, check.stderr
    why = f"{INDEX}: placed.beta.gpus_per_worker: expected an integer, got a string ('many'): the index does " \
          "not read whole, so the jobs of its entries that do not read are placed afresh"
    assert why in check.stdout
    run = geosched("gitops", "render", *tree_args(repo), "--at", AT, home=tmp_path / "home")
    assert run.code == 0 and not run.traceback, run.stderr
    assert f"warning: {why}\n" in run.stderr
    assert (repo / INDEX).read_text(encoding="utf-8") == text  # the same inputs: the same index again


def test_a_damaged_or_newer_index_keeps_every_entry_that_reads() -> None:
    """One bad entry, or a key a newer geosched writes, must not move every job (design rule 5): the render reads
    such an index entry by entry; only the damaged entry's job is placed afresh."""
    text = MAIN_INDEX.read_text(encoding="utf-8")
    whole, fault = parse_index(text)
    assert fault is None and len(whole.entries) >= 4
    data = yaml.safe_load(text)
    data["written_by"] = "geosched 9.9"  # a newer version's top-level key
    data["placed"]["research/diffusion"]["gpus_per_worker"] = "many"  # one damaged entry
    data["placed"]["nlp/bert-finetune"]["topology"] = "ring"  # a newer version's key in an entry
    salvaged, fault = parse_index(yaml.safe_dump(data, sort_keys=False))
    assert fault is not None
    assert set(salvaged.entries) == set(whole.entries) - {"research/diffusion"}
    assert salvaged.entries["nlp/bert-finetune"] == whole.entries["nlp/bert-finetune"]
    assert salvaged.inputs == whole.inputs
    # Not an index at all: nothing is kept.
    assert parse_index("kind: Job\n")[0].entries == {}


def test_a_digest_or_stamp_with_a_trailing_newline_is_refused() -> None:
    data = yaml.safe_load(MAIN_INDEX.read_text(encoding="utf-8"))
    data["placed"]["nlp/bert-finetune"]["decision_sha256"] += "\n"
    with pytest.raises(InputError, match=r"placed\.nlp/bert-finetune\.decision_sha256: expected a SHA-256"):
        read_index(yaml.safe_dump(data, sort_keys=False))
