"""A part's CPU and emulation timing are recorded, and a part whose emulator released frames
in bursts, or whose UDT senders paced faster than the bottleneck, is flagged."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
from conftest import have_linkem
from udtbed.emulation import hostwatch
from udtbed.emulation.hostwatch import DirectionName, DirectionTiming, HostReport
from udtbed.emulation.network import Network
from udtbed.emulation.runtime import NamespaceRuntime
from udtbed.emulation.topology import load
from udtbed.experiments.experiment import TOPOLOGIES_DIR as TOPOLOGIES


def direction(frames: int, bunched: int, judged: bool = True, max_1s: float | None = None) -> DirectionTiming:
    """An emulated direction's timing as flags reads it (no ``mbps``: flags does not look at it)."""
    pct = round(100 * bunched / frames, 1) if frames else 0.0
    return cast(
        DirectionTiming,
        {
            "frames_out": frames,
            "bunched": bunched,
            "bunched_pct": pct,
            "bunched_pct_max_1s": max_1s or pct,
            "dropped_queue": 0,
            "judged": judged,
        },
    )


def report_of(emulators: dict[str, dict[DirectionName, DirectionTiming]]) -> HostReport:
    """A host report with the emulators' timing alone: all that flags and mark_before_bottleneck read."""
    return cast(HostReport, {"emulators": emulators})


def test_emulator_direction_with_bunched_releases_is_flagged_and_a_punctual_one_is_not() -> None:
    host = report_of(
        {
            "l0": {
                "a_to_b": direction(160_000, 33_800),  # 10 flows, default scheduling
                "b_to_a": direction(14_000, 1_000, judged=False),  # ACKs
            }
        }
    )
    assert len(hostwatch.flags(host)) == 1 and "l0 a_to_b: 21 %" in hostwatch.flags(host)[0]
    host["emulators"]["l0"]["a_to_b"] = direction(160_000, 1_750)  # --realtime --spin-us 20
    assert hostwatch.flags(host) == []
    host["emulators"]["l0"]["a_to_b"] = direction(100, 60, judged=False)  # too few frames to judge
    assert hostwatch.flags(host) == []
    # 2 % overall, but 20 % in the second slow start ended in: flagged.
    host["emulators"]["l0"]["a_to_b"] = direction(250_000, 5_000, max_1s=20.1)
    (flag,) = hostwatch.flags(host)
    assert "20 % of the frames of one second" in flag


def test_bunching_before_the_bottleneck_is_not_flagged_because_the_bottleneck_respaces_frames(tmp_path: Path) -> None:
    # streaming-join: a and b reach c through delay-only access links (l0, l1) and the rate-
    # limited bottleneck at c (l2). libudt's busy-waiting senders leave 7-9 % of the access links'
    # frames bunched; what the receiver times is l2's spacing.
    topo = load(TOPOLOGIES / "streaming-join.toml")
    assert [(h.link.index, h.frm) for h in topo.timing_hops("a", "c")] == [(2, "edge")]
    assert [(h.link.index, h.frm) for h in topo.timing_hops("b", "c")] == [(2, "edge")]
    seen = {
        (f"l{h.link.index}", "a_to_b" if h.frm == h.link.a else "b_to_a")
        for src in "ab"
        for h in topo.timing_hops(src, "c")
    }
    host = report_of(
        {
            "l0": {"a_to_b": direction(78_684, 5_500)},
            "l1": {"a_to_b": direction(102_121, 8_200)},
            "l2": {"a_to_b": direction(180_000, 900)},
        }
    )
    hostwatch.mark_before_bottleneck(host, seen)
    assert hostwatch.flags(host) == []
    assert host["emulators"]["l0"]["a_to_b"]["before_bottleneck"]
    host["emulators"]["l2"]["a_to_b"] = direction(180_000, 18_000)  # the bottleneck itself: flagged
    hostwatch.mark_before_bottleneck(host, seen)
    (flag,) = hostwatch.flags(host)
    assert flag.startswith("emulator l2 a_to_b: 10 %")
    # A path without any rate: every hop's timing reaches the receiver.
    (tmp_path / "norate.toml").write_text(
        'name = "norate"\n[hosts]\nx = {}\ny = {}\n[switches]\ns = {}\n'
        '[[link]]\nends = ["x", "s"]\ndelay = "1ms"\n'
        '[[link]]\nends = ["s", "y"]\ndelay = "1ms"\n'
    )
    assert [h.link.index for h in load(tmp_path / "norate.toml").timing_hops("x", "y")] == [0, 1]


def test_udt_sender_pacing_faster_than_the_bottleneck_is_flagged(tmp_path: Path) -> None:
    def stats(name: str, periods: list[float]) -> Path:
        p = tmp_path / f"{name}.send.stats"
        p.write_text(
            "".join(json.dumps({"t": i * 0.2, "period_us": x}) + "\n" for i, x in enumerate(periods))
            + json.dumps({"summary": True, "period_us": 0.5})
            + "\n"
        )
        return p

    # 100 Mb/s: a 1514-byte frame takes 121 us. Slow start paces at 1 us and does not count.
    paths = {"slow": stats("slow", [1.0, 1.0, 450.0, 900.0]), "fast": stats("fast", [1.0, 27.0, 115.0])}
    pacing = hostwatch.sender_pacing(paths, {"slow": 100e6, "fast": 100e6})
    assert pacing["slow"]["min_period_us"] == 450.0 and pacing["slow"]["times_bottleneck"] == 0.27
    assert pacing["fast"]["times_bottleneck"] == 4.49
    (flag,) = hostwatch.flags(report_of({}), pacing)
    assert flag.startswith("1 UDT sender(s) paced faster than the bottleneck, up to 4.5x")
    assert "in the slow-start exit's stats line only" in flag, flag
    assert "capacity_median_pps" not in pacing["slow"], "a stack without the estimate has none"


def test_a_sender_that_keeps_pacing_faster_than_the_bottleneck_is_told_from_the_slow_start_exit(tmp_path: Path) -> None:
    p = tmp_path / "f.send.stats"
    # 100 Mb/s (121 us a frame): 27, 30 and 40 us are all over 1.5x; 115 us is not.
    p.write_text(
        "".join(json.dumps({"t": i * 0.2, "period_us": x}) + "\n" for i, x in enumerate([1.0, 27.0, 30.0, 40.0, 115.0]))
    )
    pacing = hostwatch.sender_pacing({"f": p}, {"f": 100e6})
    assert (pacing["f"]["lines_faster"], pacing["f"]["lines"]) == (3, 4)
    (flag,) = hostwatch.flags(report_of({}), pacing)
    assert "in 3 of 4 stats lines after slow start" in flag, flag


def test_the_hypervisor_s_steal_is_the_machine_s_flag_and_a_fast_sender_alone_is_not(tmp_path: Path) -> None:
    # 25 %: what /proc/stat read over a clean-clone CI run whose quick profiles' emulators were flagged bunched.
    stolen = cast(HostReport, {"emulators": {}, "steal_pct": 25.0})
    (flag,) = hostwatch.machine_flags(stolen)
    assert "the hypervisor took 25 % of the machine's CPU time" in flag and "limit 10 %" in flag
    assert hostwatch.flags(stolen) == [flag]
    assert hostwatch.machine_flags(cast(HostReport, {"emulators": {}, "steal_pct": 4.0})) == []
    p = tmp_path / "f.send.stats"
    p.write_text("".join(json.dumps({"t": i * 0.2, "period_us": x}) + "\n" for i, x in enumerate([1.0, 27.0, 30.0])))
    pacing = hostwatch.sender_pacing({"f": p}, {"f": 100e6})
    host = report_of({"l0": {"a_to_b": direction(160_000, 1_000)}})
    assert hostwatch.machine_flags(host) == [] and len(hostwatch.flags(host, pacing)) == 1
    host["emulators"]["l0"]["a_to_b"] = direction(160_000, 33_800)
    assert len(hostwatch.machine_flags(host)) == 1 and len(hostwatch.flags(host, pacing)) == 2


def test_a_udt_sender_s_capacity_estimate_is_read_after_slow_start_against_the_bottleneck(tmp_path: Path) -> None:
    # 1 Gb/s: 82 570 frames/s. Slow start's estimates (period 1 us) do not count.
    lines = [(1.0, 400_000), (12.0, 80_000), (12.5, 90_000), (13.0, 99_000)]
    p = tmp_path / "f.send.stats"
    p.write_text("".join(json.dumps({"period_us": per, "bandwidth_pps": b}) + "\n" for per, b in lines))
    pacing = hostwatch.sender_pacing({"f": p}, {"f": 1e9})["f"]
    assert pacing["capacity_median_pps"] == 90_000 and pacing["capacity_times_bottleneck"] == 1.09


@pytest.mark.needs_root
@pytest.mark.slow
@pytest.mark.skipif(not have_linkem(), reason="udt-linkem is not built")
def test_watch_records_process_cpu_and_flags_an_emulator_stalled_mid_blast(tmp_path: Path) -> None:
    topo = load(TOPOLOGIES / "chicago-amsterdam.toml")
    with Network(topo, scale=0.1, backend="linkem", workdir=tmp_path) as net:
        rt = NamespaceRuntime(net)
        py = [sys.executable, "-m", "udtbed.emulation.probe"]
        try:
            rt.spawn("amsterdam", py + ["udp-sink", "--port", "5999", "--seconds", "10"])
            time.sleep(0.5)
            watch = hostwatch.HostWatch(net)
            rt.spawn(
                "chicago",
                py
                + [
                    "udp-source",
                    "--dst",
                    net.address("amsterdam"),
                    "--port",
                    "5999",
                    "--rate",
                    "110e6",
                    "--seconds",
                    "8",
                ],
            )
            # Take the emulator off the CPU for 10 ms every 50 ms, as a busy machine does: what
            # fell due meanwhile leaves in one burst when it runs again.
            emu = net.emulators[0].pid
            stop = threading.Event()

            def stall() -> None:
                while not stop.wait(0.04):
                    os.kill(emu, signal.SIGSTOP)
                    time.sleep(0.01)
                    os.kill(emu, signal.SIGCONT)

            t = threading.Thread(target=stall)
            t.start()
            time.sleep(4.5)  # the watch sees live processes only: finish while the blast runs
            host = watch.finish()
            stop.set()
            t.join()
        finally:
            rt.stop_all()
    fwd = host["emulators"]["l0"]["a_to_b"]
    assert fwd["frames_out"] > 20_000, host["emulators"]  # 3.5 s at 100 Mb/s is 28,900 frames
    assert fwd["bunched_pct"] > 10 and fwd["judged"] and 40 < fwd["mbps"] <= 100.5, fwd
    (flag,) = [f for f in hostwatch.flags(host) if "a_to_b" in f]
    assert "left bunched" in flag
    source = [p for p in host["processes"] if p["ns"] == "h-chicago" and p["comm"].startswith("python")]
    assert source and source[0]["cpu_pct"] > 0, host["processes"]
    assert "l0/udt-linkem" in host["cpu_by_process"], host["cpu_by_process"]
    assert 0 <= host["machine_busy_pct"] <= 100 and host["cores"] == os.cpu_count()
    assert 0 <= host.get("steal_pct", -1) <= 100, host


SPIN = [sys.executable, "-c", "while True: pass"]


@contextlib.contextmanager
def stray_spinner(pidfile: Path, cpu: int | None = None) -> Iterator[int]:
    """A process spinning a core (on ``cpu`` alone where given) that is nobody's child here, as a
    leftover of another run is (setsid -f: its parent exits); its PID, killed on leaving."""
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    subprocess.run(["setsid", "-f", *pin, "sh", "-c", f'echo $$ > {pidfile}; exec "$0" "$@"', *SPIN], check=True)
    deadline = time.monotonic() + 5
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int(pidfile.read_text())
    try:
        yield pid
    finally:
        os.kill(pid, signal.SIGKILL)


def test_a_busy_process_outside_the_run_is_named_and_flagged_and_the_runners_own_are_not(tmp_path: Path) -> None:
    """A process left spinning by another run takes a core from the stacks and emulators: the
    watch names it by PID; a process the runner itself started is the run's and is not flagged."""
    topo = load(TOPOLOGIES / "chicago-amsterdam.toml")
    own = subprocess.Popen(SPIN)
    try:
        with (
            stray_spinner(tmp_path / "stray.pid") as stray,
            Network(topo, scale=0.1, backend="linkem", workdir=tmp_path) as net,
        ):
            watch = hostwatch.HostWatch(net)
            time.sleep(2)
            host = watch.finish()
    finally:
        own.kill()
        own.wait()
    outside = {p["pid"]: p for p in host.get("outside_processes", [])}
    assert stray in outside and outside[stray]["cpu_pct"] > hostwatch.OUTSIDE_PROCESS_MAX, outside
    assert own.pid not in outside, f"the runner's own child was counted outside the run: {outside[own.pid]}"
    (flag,) = [f for f in hostwatch.flags(host) if "outside this run" in f]
    assert f"pid {stray}" in flag and f"pid {own.pid}" not in flag, flag


def test_a_process_outside_the_run_below_the_limit_is_recorded_but_not_flagged() -> None:
    host = cast(
        HostReport,
        {
            "emulators": {},
            "outside_processes": [{"pid": 7, "comm": "dockerd", "cpu_pct": hostwatch.OUTSIDE_PROCESS_MAX}],
        },
    )
    assert hostwatch.flags(host) == []


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_a_busy_process_confined_to_other_cpus_than_the_runs_is_not_counted(tmp_path: Path) -> None:
    """Runs side by side on CPU sets of their own (the full-scale plans' lanes) do not share CPUs:
    another lane's emulator spinning on its own CPU is not a process outside this run."""
    topo = load(TOPOLOGIES / "chicago-amsterdam.toml")
    mine, other = sorted(os.sched_getaffinity(0))[:2]
    with (
        stray_spinner(tmp_path / "lane.pid", cpu=other) as lane,
        Network(topo, scale=0.1, backend="linkem", workdir=tmp_path) as net,
    ):
        apart, shared = hostwatch.HostWatch(net, [mine]), hostwatch.HostWatch(net, [mine, other])
        time.sleep(2)
        host_apart, host_shared = apart.finish(), shared.finish()
    assert lane not in {p["pid"] for p in host_apart.get("outside_processes", [])}, host_apart
    assert lane in {p["pid"] for p in host_shared.get("outside_processes", [])}, "on a CPU of the run it counts"
