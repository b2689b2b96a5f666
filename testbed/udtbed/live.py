"""Streaming a part's progress files to InfluxDB while they grow, each line read once.

(Interim version: receivers' throughput only.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .influx import InfluxWriter
from .stacks import Sample


class Tail:
    """The new complete lines of a growing file, each returned once."""

    def __init__(self, path: Path) -> None:
        self.path, self.pos, self.rest = path, 0, b""

    def lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
        except OSError:
            return []
        self.pos += len(data)
        data = self.rest + data
        *done, self.rest = data.split(b"\n")
        return [d.decode(errors="replace") for d in done]


@dataclass
class WatchedFlow:
    name: str
    recv_stats: Path
    parse_line: Callable[[str], Sample | None]
    offset_s: float
    send_stats: Path | None = None


class LiveWatch:
    def __init__(
        self,
        writer: InfluxWriter,
        tags: Callable[[str], dict[str, str]],
        net: Any,
        flows: list[WatchedFlow],
        t_wall0: float,
    ) -> None:
        self.writer, self.tags, self.flows, self.t_wall0 = writer, tags, flows, t_wall0
        self.tails = {f.name: Tail(f.recv_stats) for f in flows}
        self._samples: dict[str, list[Sample]] = {f.name: [] for f in flows}

    def poll(self) -> None:
        for f in self.flows:
            got = self._samples[f.name]
            for line in self.tails[f.name].lines():
                s = f.parse_line(line)
                if s is None:
                    continue
                last = got[-1] if got else Sample(0.0, 0)
                dt = s.t - last.t
                if dt > 0:
                    self.writer.write(
                        "throughput",
                        self.tags(f.name),
                        {"mbps": (s.bytes - last.bytes) * 8 / dt / 1e6, "bytes": s.bytes},
                        ts=self.t_wall0 + f.offset_s + s.t,
                    )
                got.append(s)

    def samples(self, flow: str) -> list[Sample]:
        return self._samples[flow]

    def close(self) -> None:
        self.poll()
