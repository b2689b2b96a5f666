"""A part's stats files streamed to InfluxDB while they grow.

The runner makes one :class:`LiveWatch` when a part's flows start, calls :meth:`LiveWatch.poll`
every half second or so and :meth:`LiveWatch.close` at the end. Every file is read once: a
:class:`Tail` keeps its offset and hands out only the complete lines appended since the last
poll, so a line still being written waits for the next one. The receivers' samples read on the
way are kept (:meth:`LiveWatch.samples`): the final results need no second parse.

What is written (tags from the runner's ``tags(flow)``: run, experiment, part, stack, flow, ...):

- ``throughput``: ``mbps`` (since the previous sample), ``bytes`` — every receiver, any stack.
- ``sender``: ``rtt_ms``, ``flow_window``, ``cwnd``, ``period_us``, ``mbps``, and per-second
  rates of the cumulative counters ``losses_per_s``, ``retrans_per_s``, ``naks_recv_per_s`` —
  a UDT sender's ``--stats`` JSON lines (docs/cli.md, "Stats JSON lines").
- ``receiver``: ``naks_sent_per_s``, ``losses_per_s`` — receivers whose lines are UDT JSON.
- ``link`` (extra tags ``link`` = ``l<index>``, ``direction`` = ``a_to_b``/``b_to_a``; no
  ``flow``): gauges ``queue_frames``, ``in_flight``, ``queue_delay_avg_us``, rates
  ``mbps_out``, ``dropped_per_s``, ``dropped_queue_per_s``, ``dropped_loss_per_s``,
  ``bunched_per_s`` — ``udt-linkem``'s per-second ``--stats`` lines (docs/link-emulation.md,
  "Stats"); the netem backend has none, so nothing is written.
- ``calibration`` (extra tags ``src``, ``dst``), once per path by :func:`write_calibration`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from udtharness.cli import stats_json

from ..emulation.calibrate import PathCalibration
from ..emulation.network import Network
from ..results.influx import InfluxWriter
from .stacks import Sample

Tags = Callable[[str], dict[str, str]]

SENDER_GAUGES = ("rtt_ms", "flow_window", "cwnd", "period_us", "mbps")
SENDER_COUNTERS = ("losses", "retrans", "naks_recv")
RECEIVER_COUNTERS = ("naks_sent", "losses")
LINK_GAUGES = ("queue_frames", "in_flight", "queue_delay_avg_us")
LINK_COUNTERS = ("dropped", "dropped_queue", "dropped_loss", "bunched")
LINK_DIRECTIONS = ("a_to_b", "b_to_a")


class Tail:
    """The complete lines appended to a file since the previous :meth:`lines`.

    A file that does not exist yet has no lines; one that shrank was replaced and is read
    again from the start. ``from_end``: lines already there when the tail is made are not
    new (an emulator's stats file outlives each stack's turn on the link).
    """

    def __init__(self, path: Path, from_end: bool = False) -> None:
        self.path = path
        self.offset = 0
        self._partial = b""
        self._skip_first = False  # started inside a line: its rest is not a whole line
        if from_end:
            try:
                with path.open("rb") as f:
                    self.offset = f.seek(0, 2)
                    if self.offset:
                        f.seek(self.offset - 1)
                        self._skip_first = f.read(1) != b"\n"
            except OSError:
                pass

    def lines(self) -> list[str]:
        try:
            with self.path.open("rb") as f:
                if f.seek(0, 2) < self.offset:
                    self.offset, self._partial, self._skip_first = 0, b"", False
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        if not data:
            return []
        self.offset += len(data)
        *complete, self._partial = (self._partial + data).split(b"\n")
        if self._skip_first and complete:
            complete, self._skip_first = complete[1:], False
        return [raw.decode("utf-8", "replace") for raw in complete if raw.strip()]


class Rates:
    """Per-second rates of cumulative counters between consecutive readings.

    ``from_zero``: the counters were 0 at t = 0 (a connection's stats), so the first reading
    has a rate too; otherwise (a file joined midway) it only sets the baseline. A counter
    that went down (a restart) counts from 0 again.
    """

    def __init__(self, keys: tuple[str, ...], from_zero: bool = True) -> None:
        self.keys = keys
        self._last: tuple[float, dict[str, float]] | None = (0.0, dict.fromkeys(keys, 0.0)) if from_zero else None

    def update(self, t: float, values: Mapping[str, Any]) -> dict[str, float]:
        now = {k: float(values[k]) for k in self.keys if isinstance(values.get(k), int | float)}
        last, self._last = self._last, (t, now)
        if last is None or t <= last[0]:
            return {}
        dt = t - last[0]
        out = {}
        for k, v in now.items():
            before = last[1].get(k)
            if before is not None:
                out[f"{k}_per_s"] = (v - before if v >= before else v) / dt
        return out


def _numbers(d: Mapping[str, Any], keys: Iterable[str]) -> dict[str, float]:
    return {k: float(d[k]) for k in keys if isinstance(d.get(k), int | float)}


@dataclass
class WatchedFlow:
    name: str  # flow name, Influx tag "flow"
    recv_stats: Path  # the receiver's progress file
    parse_line: Callable[[str], Sample | None]  # the stack's line parser: UDT JSON lines or iperf3 text
    offset_s: float  # when the flow started, seconds after the part's t0
    send_stats: Path | None = None  # a UDT sender's --stats JSON lines (docs/cli.md), if any


@dataclass
class _FlowState:
    flow: WatchedFlow
    recv: Tail
    send: Tail | None
    samples: list[Sample] = field(default_factory=list)
    recv_rates: Rates = field(default_factory=lambda: Rates(RECEIVER_COUNTERS))
    send_rates: Rates = field(default_factory=lambda: Rates(SENDER_COUNTERS))


@dataclass
class _LinkState:
    index: int
    tail: Tail
    t0_wall: float  # wall-clock time of the emulator's t_s = 0
    rates: dict[str, Rates] = field(
        default_factory=lambda: {d: Rates(LINK_COUNTERS + ("bytes_out",), from_zero=False) for d in LINK_DIRECTIONS}
    )


class LiveWatch:
    """Streams a part's receiver, sender and emulator stats to ``writer`` as they grow.

    ``tags(flow)`` gives a flow's tags (``tags("")`` those of the part's links); ``t_wall0``
    is the part's t0 on the wall clock, each flow's times count from ``t_wall0 + offset_s``.
    ``net``: the part's network, whose emulators' stats become ``link`` points (None: none).
    """

    def __init__(
        self, writer: InfluxWriter, tags: Tags, net: Network | None, flows: list[WatchedFlow], t_wall0: float
    ) -> None:
        self.writer, self.tags, self.t_wall0 = writer, tags, t_wall0
        self._flows = {
            f.name: _FlowState(f, Tail(f.recv_stats), Tail(f.send_stats) if f.send_stats else None) for f in flows
        }
        self._links = [
            _LinkState(i, Tail(path, from_end=True), t0)
            for i, (path, t0) in (net.link_stats_files() if net else {}).items()
        ]

    def poll(self) -> None:
        """Read what is new in every file and write its points."""
        for st in self._flows.values():
            self._poll_receiver(st)
            if st.send:
                self._poll_sender(st, st.send)
        for link in self._links:
            self._poll_link(link)

    def samples(self, flow: str) -> list[Sample]:
        """Every receiver sample of ``flow`` read so far."""
        return list(self._flows[flow].samples)

    def close(self) -> None:
        """A last poll: whatever the processes wrote before they stopped."""
        self.poll()

    def _poll_receiver(self, st: _FlowState) -> None:
        f, tags = st.flow, self.tags(st.flow.name)
        for line in st.recv.lines():
            s = f.parse_line(line)
            if s is None:
                continue
            last = st.samples[-1] if st.samples else Sample(0.0, 0)
            if s.t > last.t:
                mbps = (s.bytes - last.bytes) * 8 / (s.t - last.t) / 1e6
                self.writer.write("throughput", tags, {"mbps": mbps, "bytes": s.bytes}, ts=self._ts(f, s.t))
            st.samples.append(s)
            if s.stats is not None and (rates := st.recv_rates.update(s.t, s.stats)):
                self.writer.write("receiver", tags, rates, ts=self._ts(f, s.t))

    def _poll_sender(self, st: _FlowState, tail: Tail) -> None:
        tags = self.tags(st.flow.name)
        for line in tail.lines():
            d = stats_json(line)
            if d is None:
                continue
            fields = _numbers(d, SENDER_GAUGES) | st.send_rates.update(d["t"], d)
            if fields:
                self.writer.write("sender", tags, fields, ts=self._ts(st.flow, d["t"]))

    def _poll_link(self, link: _LinkState) -> None:
        for line in link.tail.lines():
            try:
                d = json.loads(line)
                t = float(d["t_s"])
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                continue
            for direction in LINK_DIRECTIONS:
                x = d.get(direction)
                if not isinstance(x, dict):
                    continue
                counters = _numbers(x, ("dropped_queue", "dropped_loss", "dropped_oversize", "bunched", "bytes_out"))
                counters["dropped"] = sum(
                    counters.get(k, 0.0) for k in ("dropped_queue", "dropped_loss", "dropped_oversize")
                )
                rates = link.rates[direction].update(t, counters)
                if "bytes_out_per_s" in rates:
                    rates["mbps_out"] = rates.pop("bytes_out_per_s") * 8 / 1e6
                fields = _numbers(x, LINK_GAUGES) | rates
                tags = self.tags("") | {"link": f"l{link.index}", "direction": direction}
                self.writer.write("link", tags, fields, ts=link.t0_wall + t)

    def _ts(self, f: WatchedFlow, t: float) -> float:
        return self.t_wall0 + f.offset_s + t


def write_calibration(writer: InfluxWriter, tags: Mapping[str, str], cals: Iterable[PathCalibration]) -> None:
    """One ``calibration`` point per path (tags ``src``, ``dst`` added to ``tags``): measured
    ``rtt_ms``, ``rtt_min_ms``, ``rate_mbps`` beside the wanted ``expected_rtt_ms``,
    ``expected_rate_mbps``, the blast's ``bunched_pct``, with ``rtt_ok``, ``rate_ok``, ``ok`` as
    1/0. A figure that was not
    measured (no ping reply, an unlimited link) is left out."""
    for c in cals:
        fields = {
            k: float(v)
            for k, v in (
                ("rtt_ms", c.rtt_ms),
                ("rtt_min_ms", c.rtt_min_ms),
                ("expected_rtt_ms", c.expected_rtt_ms),
                ("rate_mbps", c.rate_mbps),
                ("expected_rate_mbps", c.expected_rate_mbps),
                ("bunched_pct", c.bunched_pct),
                ("rtt_ok", c.rtt_ok),
                ("rate_ok", c.rate_ok),
                ("ok", c.ok),
            )
            if v is not None
        }
        writer.write("calibration", dict(tags) | {"src": c.src, "dst": c.dst}, fields)
