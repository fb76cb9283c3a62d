"""Parsers of ping, timed TCP connects and iperf3 -J, on outputs captured from the testbed (data/: iputils
20221126, iperf 3.12) plus a few hand-written error lines from other versions."""

from __future__ import annotations

from pathlib import Path

import pytest

from geosched.probes.parsers import (
    OutputError,
    PingUnavailable,
    parse_iperf3,
    parse_pid,
    parse_ping,
    parse_tcp_rtt,
    percentile,
)

DATA = Path(__file__).parent / "data"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_ping_intra_zone_percentiles_and_mdev() -> None:
    run = parse_ping(read("ping_intra_zone.txt"))
    assert (run.method, run.sent, run.received, run.loss) == ("icmp", 20, 20, 0.0)
    assert len(run.rtts_ms) == 20
    assert run.summary == (0.549, 0.575, 0.643, 0.027)
    assert run.p50_ms == pytest.approx((0.562 + 0.568) / 2)
    assert 0.596 <= run.p95_ms <= 0.643
    assert run.jitter_ms == 0.027


def test_ping_with_loss_and_pipe_suffix() -> None:
    # 26 sent, 20 back; the summary line ends in ", pipe 2".
    run = parse_ping(read("ping_inter_zone_loss.txt"), exit_status=1)
    assert (run.sent, run.received) == (26, 20)
    assert run.loss == pytest.approx(6 / 26)
    assert run.p50_ms == pytest.approx(60.4)
    assert run.summary is not None and run.summary[1] == 60.381


def test_ping_all_lost_is_a_measurement_not_an_error() -> None:
    run = parse_ping(read("ping_all_lost.txt"), exit_status=1)
    assert (run.sent, run.received, run.loss, run.rtts_ms, run.summary) == (5, 0, 1.0, (), None)
    with pytest.raises(OutputError):
        _ = run.p50_ms


def test_ping_quiet_output_falls_back_to_the_summary() -> None:
    run = parse_ping(read("ping_quiet_loss.txt"), exit_status=1)
    assert (run.sent, run.received) == (20, 13)
    assert run.rtts_ms == ()
    assert run.p50_ms == 10.342 and run.p95_ms == pytest.approx(10.342 + 0.9 * (10.436 - 10.342))


def test_ping_duplicates_are_not_round_trips() -> None:
    text = read("ping_loss_verbose.txt").replace("icmp_seq=3 ttl=62 time=10.4 ms",
                                                  "icmp_seq=3 ttl=62 time=10.4 ms\n"
                                                  "64 bytes from 198.18.1.2: icmp_seq=3 ttl=62 time=99.9 ms (DUP!)")
    run = parse_ping(text)
    assert 99.9 not in run.rtts_ms and len(run.rtts_ms) == 4


def test_busybox_summary_is_understood() -> None:
    text = ("PING 10.0.0.2 (10.0.0.2): 56 data bytes\n64 bytes from 10.0.0.2: seq=0 ttl=64 time=0.118 ms\n"
            "\n--- 10.0.0.2 ping statistics ---\n1 packets transmitted, 1 packets received, 0% packet loss\n"
            "round-trip min/avg/max = 0.118/0.118/0.118 ms\n")
    run = parse_ping(text)
    assert (run.sent, run.received, run.rtts_ms) == (1, 1, (0.118,))
    assert run.summary == (0.118, 0.118, 0.118, 0.0)


@pytest.mark.parametrize(("stderr", "reason"), [
    ("ping: socket: Operation not permitted", "ICMP not permitted"),
    ("ping: cannot flood; minimal interval allowed for user is 200ms", "interval"),
    ("ping: cannot flood, minimal interval for user must be >= 2 ms, use -i 0.002 (or higher)", "interval"),
    ("sh: 1: ping: not found", "not installed"),
    ("ping: nosuchhost: Name or service not known", "resolve"),
])
def test_ping_that_cannot_run(stderr: str, reason: str) -> None:
    with pytest.raises(PingUnavailable, match=reason):
        parse_ping("", stderr, 2)


def test_ping_garbage_is_an_output_error() -> None:
    with pytest.raises(OutputError, match="no statistics"):
        parse_ping("hello", "", 0)


def test_tcp_connect_times() -> None:
    run = parse_tcp_rtt(read("tcp_rtt_loss.txt"))
    assert (run.method, run.sent, run.received) == ("tcp", 10, 9)
    assert run.p50_ms == pytest.approx(60.498)
    with pytest.raises(PingUnavailable):
        parse_tcp_rtt("", "sh: 1: python3: not found", 127)
    with pytest.raises(OutputError):
        parse_tcp_rtt("12.5\nbogus\n")


def test_iperf3_client_json() -> None:
    run = parse_iperf3(read("iperf3_client.json"))
    assert run.received_bps == pytest.approx(17679845.768220816)
    assert run.gbps == pytest.approx(0.0176798, rel=1e-4)
    assert run.retransmits == 749
    assert run.min_rtt_ms == pytest.approx(10.947)


def test_iperf3_error_member_even_with_exit_zero() -> None:
    with pytest.raises(OutputError, match="Connection refused"):
        parse_iperf3(read("iperf3_refused.json"))
    with pytest.raises(OutputError, match="no JSON"):
        parse_iperf3("iperf3: error - unable to connect")
    with pytest.raises(OutputError, match="sum_received"):
        parse_iperf3('{"end": {}}')


def test_pid_and_percentile() -> None:
    assert parse_pid("4242\n") == 4242
    for bad in ("", "1", "12a", "-5"):
        with pytest.raises(OutputError):
            parse_pid(bad)
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)
    assert percentile([5.0], 95) == 5.0
