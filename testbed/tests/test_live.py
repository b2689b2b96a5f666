"""LiveWatch: each stats file read once, incrementally; counters turned into rates (no root)."""

import json
from pathlib import Path
from typing import cast

import pytest
from udtbed.emulation.calibrate import PathCalibration
from udtbed.emulation.network import Network
from udtbed.experiments.live import LiveWatch, Tail, WatchedFlow, write_calibration
from udtbed.experiments.stacks import Sample, parse_stats_line
from udtbed.results.influx import InfluxWriter

T0 = 1_700_000_000.0


# A point as written: measurement, tags, fields, timestamp.
Point = tuple[str, dict[str, str], dict[str, float], float | None]


class Recorder(InfluxWriter):
    def __init__(self) -> None:
        super().__init__(None)
        self.points: list[Point] = []

    def write(self, measurement: str, tags: dict[str, str], fields: dict[str, float], ts: float | None = None) -> None:
        self.points.append((measurement, dict(tags), dict(fields), ts))

    def of(self, measurement: str) -> list[Point]:
        return [p for p in self.points if p[0] == measurement]


def tags(flow: str) -> dict[str, str]:
    return {"run": "r1", "stack": "udt", "flow": flow}


def udt_line(t: float, **kv: object) -> str:
    return json.dumps({"stack": "udt-rs", "t": t} | kv) + "\n"


def append(path: Path, text: str) -> None:
    with path.open("a") as f:
        f.write(text)


def test_receiver_file_written_in_pieces_is_read_once_and_a_half_line_waits(tmp_path: Path) -> None:
    recv = tmp_path / "r.stats"
    calls: list[str] = []

    def parse(line: str) -> Sample | None:
        calls.append(line)
        return parse_stats_line(line)

    w = Recorder()
    watch = LiveWatch(w, tags, None, [WatchedFlow("f", recv, parse, 2.0)], T0)
    watch.poll()  # no file yet
    assert w.points == [] and watch.samples("f") == []

    first, second = udt_line(0.5, role="recv", bytes=1_000_000), udt_line(1.0, role="recv", bytes=3_000_000)
    append(recv, first + second[:17])  # the second line half written
    watch.poll()
    assert [p[2] for p in w.of("throughput")] == [{"mbps": 16.0, "bytes": 1_000_000}]
    assert w.of("throughput")[0][3] == pytest.approx(T0 + 2.5)
    assert w.of("throughput")[0][1] == tags("f")

    watch.poll()  # nothing new
    append(recv, second[17:])
    watch.poll()
    assert [p[2] for p in w.of("throughput")][1] == {"mbps": 32.0, "bytes": 3_000_000}
    append(recv, json.dumps({"t": 1.2, "bytes": 3_000_000, "summary": True}) + "\n")
    watch.close()
    assert watch.samples("f") == [Sample(0.5, 1_000_000), Sample(1.0, 3_000_000)]
    assert len(calls) == 3, "every line parsed exactly once"


def test_sender_counters_become_per_second_rates(tmp_path: Path) -> None:
    send = tmp_path / "s.stats"
    append(
        send, udt_line(0.5, rtt_ms=40.1, flow_window=8192, cwnd=16.0, period_us=12.5, losses=10, retrans=4, naks_recv=2)
    )
    append(
        send, udt_line(1.0, rtt_ms=41.0, flow_window=8000, cwnd=20.0, period_us=10.0, losses=30, retrans=9, naks_recv=3)
    )
    w = Recorder()
    LiveWatch(w, tags, None, [WatchedFlow("f", tmp_path / "none", parse_stats_line, 1.0, send)], T0).close()
    (m1, tg, f1, ts1), (_, _, f2, ts2) = w.of("sender")
    assert tg == tags("f") and (ts1, ts2) == (T0 + 1.5, T0 + 2.0)
    assert f1 == {
        "rtt_ms": 40.1,
        "flow_window": 8192,
        "cwnd": 16.0,
        "period_us": 12.5,
        "losses_per_s": 20.0,
        "retrans_per_s": 8.0,
        "naks_recv_per_s": 4.0,
    }
    assert (f2["losses_per_s"], f2["retrans_per_s"], f2["naks_recv_per_s"]) == (40.0, 10.0, 2.0)
    assert f2["cwnd"] == 20.0


def test_receiver_rates_from_udt_lines_and_none_from_iperf3_text(tmp_path: Path) -> None:
    udt, tcp = tmp_path / "udt.stats", tmp_path / "tcp.stats"
    append(udt, udt_line(1.0, role="recv", bytes=10, naks_sent=5, losses=50))
    append(udt, udt_line(2.0, role="recv", bytes=20, naks_sent=6, losses=50))
    append(tcp, "[  5]   0.00-0.20   sec  2.50 MBytes   105 Mbits/sec\n")
    w = Recorder()
    tcp_parse = lambda line: Sample(0.2, 2_621_440) if "sec" in line else None  # noqa: E731
    flows = [WatchedFlow("u", udt, parse_stats_line, 0.0), WatchedFlow("t", tcp, tcp_parse, 0.0)]
    LiveWatch(w, tags, None, flows, T0).close()
    assert [(p[1]["flow"], p[2]) for p in w.of("receiver")] == [
        ("u", {"naks_sent_per_s": 5.0, "losses_per_s": 50.0}),
        ("u", {"naks_sent_per_s": 1.0, "losses_per_s": 0.0}),
    ]
    assert {p[1]["flow"] for p in w.of("throughput")} == {"u", "t"}


class FakeNet:
    """The emulators' stats files, all LiveWatch reads of a built network."""

    def __init__(self, files: dict[int, tuple[Path, float]]):
        self.files = files

    def link_stats_files(self) -> dict[int, tuple[Path, float]]:
        return self.files


def linkem_line(t: float, dropped: int, bunched: int, bytes_out: int, queue: int) -> str:
    d = {
        "frames_in": 0,
        "frames_out": 0,
        "bytes_out": bytes_out,
        "dropped_queue": dropped,
        "dropped_loss": 1,
        "dropped_oversize": 0,
        "in_flight": 3,
        "queue_frames": queue,
        "queue_delay_avg_us": 250.0,
        "bunched": bunched,
    }
    return json.dumps({"t_s": t, "a_to_b": d, "b_to_a": d | {"dropped_queue": 0, "bunched": 0}}) + "\n"


def test_link_stats_start_at_the_watch_and_counters_become_rates(tmp_path: Path) -> None:
    stats = tmp_path / "linkem.jsonl"
    old = linkem_line(1.0, 100, 10, 1_000_000, 0)
    append(stats, old + old[:20])  # a stack's turn before this one, and a line being written
    w = Recorder()
    watch = LiveWatch(w, tags, cast(Network, FakeNet({2: (stats, T0 - 10)})), [], T0)
    append(stats, old[20:] + linkem_line(2.0, 100, 10, 1_000_000, 5) + linkem_line(4.0, 300, 14, 3_500_000, 7))
    watch.close()
    pts = w.of("link")
    assert [(p[1]["link"], p[1]["direction"], p[3]) for p in pts] == [
        ("l2", "a_to_b", T0 - 8),
        ("l2", "b_to_a", T0 - 8),
        ("l2", "a_to_b", T0 - 6),
        ("l2", "b_to_a", T0 - 6),
    ]
    assert "flow" not in pts[0][1] or pts[0][1]["flow"] == ""
    # The first line only sets the baseline of the counters: the file was joined midway.
    assert pts[0][2] == {"queue_frames": 5, "in_flight": 3, "queue_delay_avg_us": 250.0}
    assert pts[2][2] == {
        "queue_frames": 7,
        "in_flight": 3,
        "queue_delay_avg_us": 250.0,
        "dropped_per_s": 100.0,
        "dropped_queue_per_s": 100.0,
        "dropped_loss_per_s": 0.0,
        "bunched_per_s": 2.0,
        "mbps_out": 10.0,
    }
    assert pts[3][2]["dropped_per_s"] == 0.0


def test_tail_of_a_missing_then_replaced_file(tmp_path: Path) -> None:
    p = tmp_path / "x"
    t = Tail(p, from_end=True)
    assert t.lines() == []
    p.write_text("a\nb")
    assert t.lines() == ["a"]
    p.write_text("c\n")  # shorter than what was read: a new file
    assert t.lines() == ["c"]


def test_calibration_written_once_per_path_without_missing_figures() -> None:
    w = Recorder()
    cals = [
        PathCalibration("chicago", "amsterdam", 110.0, 110.4, 110.2, 100.0, 99.5, True, True, 2.5),
        PathCalibration("chicago", "local", 0.04, None, None, None, None, False, True),
    ]
    write_calibration(w, {"run": "r1", "experiment": "e", "part": "p"}, cals)
    (_, t1, f1, _), (_, t2, f2, _) = w.of("calibration")
    assert t1 == {"run": "r1", "experiment": "e", "part": "p", "src": "chicago", "dst": "amsterdam"}
    assert f1 == {
        "rtt_ms": 110.4,
        "rtt_min_ms": 110.2,
        "expected_rtt_ms": 110.0,
        "rate_mbps": 99.5,
        "expected_rate_mbps": 100.0,
        "bunched_pct": 2.5,
        "rtt_ok": 1.0,
        "rate_ok": 1.0,
        "ok": 1.0,
    }
    assert t2["dst"] == "local" and f2 == {"expected_rtt_ms": 0.04, "rtt_ok": 0.0, "rate_ok": 1.0, "ok": 0.0}
