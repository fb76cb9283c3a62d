"""Trace readers: every format detected from content, bad rows reported with their line, never dropped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from geosched.core.errors import InputError
from geosched.simulate import detect_format, parse_trace, read_trace
from geosched.simulate.gavel import parse_throughputs, shipped_throughputs, shipped_traces

TRACES = Path(__file__).parent / "data" / "traces"


@pytest.mark.parametrize(("name", "fmt"), [
    ("gavel.trace", "gavel"), ("gavel_bad.trace", "gavel"),
    ("alibaba.csv", "alibaba"), ("alibaba_bad.csv", "alibaba"),
    ("philly.json", "philly"), ("philly_bad.json", "philly"),
    ("plain.csv", "csv"), ("plain_noheader.csv", "csv"), ("plain_bad.csv", "csv"),
])
def test_format_is_detected_from_content(name: str, fmt: str) -> None:
    assert detect_format((TRACES / name).read_text()) == fmt


def test_every_shipped_gavel_trace_reads_cleanly() -> None:
    paths = shipped_traces()
    assert len(paths) == 5
    for path in paths:
        read = read_trace(path)
        assert read.format == "gavel" and not read.errors and not read.skipped
        assert len(read.jobs) == len(path.read_text().splitlines())


def test_unknown_content_and_empty_files_are_input_errors(tmp_path: Path) -> None:
    odd = tmp_path / "odd.txt"
    odd.write_text("hello world\n")
    with pytest.raises(InputError, match="line 1: unknown trace format"):
        read_trace(odd)
    empty = tmp_path / "empty.csv"
    empty.write_text("\n\n")
    with pytest.raises(InputError, match="empty trace"):
        read_trace(empty)
    with pytest.raises(InputError, match="no such file"):
        read_trace(tmp_path / "missing.csv")


def test_explicit_format_overrides_detection() -> None:
    text = (TRACES / "plain_noheader.csv").read_text()
    assert parse_trace(text, "t", "csv").format == "csv"
    with pytest.raises(InputError, match="line 1: expected 7 tab-separated fields"):
        parse_trace(text, "t", "gavel")
    with pytest.raises(InputError, match="unknown trace format 'swf'"):
        parse_trace(text, "t", "swf")


def test_gavel_duration_is_total_steps_over_measured_v100_throughput() -> None:
    read = read_trace(TRACES / "gavel.trace")
    first, big = read.jobs[0], read.jobs[-1]
    v100 = shipped_throughputs().model("Transformer (batch size 128)").consolidated
    assert first.duration_s == pytest.approx(5635991 / v100[1])
    assert (first.submit_time_s, first.gpus, first.total_steps, first.line) == (0.0, 1, 5635991, 1)
    # 16 GPUs were never measured: the 8-GPU throughput scales linearly.
    lm = shipped_throughputs().model("LM (batch size 20)").consolidated
    assert big.gpus == 16 and big.duration_s == pytest.approx(6129666 / (2 * lm[8]))


def test_strict_mode_stops_at_the_first_bad_row_with_its_line() -> None:
    with pytest.raises(InputError) as info:
        read_trace(TRACES / "gavel_bad.trace")
    assert (info.value.field, info.value.reason) == ("line 2", "expected 7 tab-separated fields, got 6")
    assert str(info.value).startswith(str(TRACES / "gavel_bad.trace") + ": line 2: ")


@pytest.mark.parametrize(("name", "good", "bad"), [
    ("gavel_bad.trace", [1, 3, 8], {2: "7 tab-separated", 4: "total steps: must be >= 1", 5: "unknown job type",
                                    7: "arrival time: expected a number"}),
    ("alibaba_bad.csv", [2, 6], {3: "num_gpu: expected a number", 4: "deletion_time 9573826 is before",
                                 5: "expected 11 comma-separated fields"}),
    ("philly_bad.json", [2, 10], {5: "submitted_time: expected a time", 6: "end_time is before start_time",
                                  9: "expected a job object"}),
    ("plain_bad.csv", [2, 6], {3: "gpus: must be >= 1", 4: "duration: must be >= 0",
                               5: "expected 3 comma-separated fields"}),
])
def test_lenient_mode_reports_every_bad_row_and_keeps_the_rest(name: str, good: list[int],
                                                               bad: dict[int, str]) -> None:
    read = read_trace(TRACES / name, strict=False)
    assert [j.line for j in read.jobs] == good
    assert [e.line for e in read.errors] == sorted(bad)
    for issue in read.errors:
        assert bad[issue.line] in issue.reason
    assert read.errors[0].describe("t.csv").startswith(f"t.csv: line {read.errors[0].line}: ")


def test_alibaba_pods_skip_cpu_only_and_unscheduled_with_their_line() -> None:
    read = read_trace(TRACES / "alibaba.csv")
    assert [(j.id, j.gpus, j.gpus_per_worker, j.duration_s) for j in read.jobs] == [
        ("openb-pod-0017", 8, 8, 10769854 - 9437497),
        ("openb-pod-0022", 1, 1, 9973826 - 9679175),  # a GPU-sharing pod counts as one GPU
        ("openb-pod-0035", 1, 1, 9968575 - 9967063),
        ("openb-pod-0128", 8, 8, 10035454 - 10034615),
    ]
    assert read.jobs[0].submit_time_s == 9437497
    assert [(s.line, s.reason.split(": ")[1]) for s in read.skipped] == [
        (2, "CPU-only pod (num_gpu 0)"), (6, "never scheduled (no scheduled_time)")]


def test_philly_jobs_sum_their_attempts_and_keep_their_layout() -> None:
    read = read_trace(TRACES / "philly.json")
    first, two_nodes, uneven = read.jobs
    # 01:12:09-01:13:23 (74 s) + 01:13:30-02:13:30 (3600 s), submitted first: t = 0.
    assert (first.submit_time_s, first.duration_s, first.gpus, first.gpus_per_worker) == (0.0, 3674.0, 8, 8)
    assert (two_nodes.submit_time_s, two_nodes.gpus, two_nodes.gpus_per_worker) == (801.0, 16, 8)
    assert (uneven.gpus, uneven.gpus_per_worker, uneven.line) == (3, None, 46)
    assert [(s.line, "never ran" in s.reason or "still running" in s.reason) for s in read.skipped] == [
        (15, True), (35, True)]


def test_an_alibaba_pod_list_without_its_time_columns_says_which_it_lacks(tmp_path: Path) -> None:
    # The header of alibaba/clusterdata cluster-trace-gpu-v2023's openb_pod_list_multigpu50.csv, which has no times.
    pods = tmp_path / "openb_pod_list_multigpu50.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-0000,12000,16384,1,1000\n")
    with pytest.raises(InputError, match=r"unknown trace format .*; read as 'alibaba', the header lacks "
                                         r"creation_time, deletion_time, scheduled_time$"):
        read_trace(pods)


def test_philly_times_written_none_are_missing_as_null_is() -> None:
    # philly_none.json: the README's example job (msr-fiddle/philly-traces README.md, verbatim) and the two cases its
    # notes name, with the missing times written "None" as the trace's own notebook reads them (`parse_date`).
    read = read_trace(TRACES / "philly_none.json")
    assert len(read.jobs) == 1
    reasons = sorted(s.reason.split(": ", 1)[1] for s in read.skipped)
    assert reasons == ["no attempt has both start_time and end_time",
                       "still running when the trace was taken (last attempt has no end_time)"]


def test_philly_json_syntax_errors_name_their_line(tmp_path: Path) -> None:
    bad = tmp_path / "log.json"
    bad.write_text('[\n  {"jobid": "a",\n   "attempts": [}\n]\n')
    with pytest.raises(InputError, match="line 3: not valid JSON"):
        read_trace(bad)
    trailing = tmp_path / "trailing.json"
    trailing.write_text('[]\n[]\n')
    with pytest.raises(InputError, match="line 2: not valid JSON: text after the list"):
        read_trace(trailing)


def test_plain_csv_with_and_without_header() -> None:
    with_header = read_trace(TRACES / "plain.csv").jobs
    assert [(j.submit_time_s, j.gpus, j.duration_s, j.model) for j in with_header] == [
        (0.0, 8, 3600.0, "ResNet-50 (batch size 64)"), (60.0, 16, 7200.0, "Transformer (batch size 64)"),
        (120.0, 2, 600.0, None)]
    bare = read_trace(TRACES / "plain_noheader.csv").jobs
    assert [(j.id, j.gpus, j.model) for j in bare] == [("job-1", 4, None), ("job-2", 8, "LM (batch size 20)")]


def test_plain_csv_header_must_name_known_columns(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text("submit_time,gpus,duration,priority\n0,1,10,5\n")
    with pytest.raises(InputError, match="line 1: unknown column"):
        read_trace(path)


def test_throughputs_file_errors_are_input_errors() -> None:
    with pytest.raises(InputError, match="v100"):
        parse_throughputs({"k80": {}}, "t.json")
    with pytest.raises(InputError, match="expected a key like"):
        parse_throughputs({"v100": {"ResNet": {"null": 1.0}}}, "t.json")
    good = parse_throughputs(json.loads('{"v100": {"(\'M\', 1)": {"null": 2.0}}}'), "t.json")
    assert good.duration_s("M", 1, 10) == 5.0
