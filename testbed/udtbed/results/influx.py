"""Live time series to InfluxDB 1.x (line protocol over HTTP), never failing the run.

:class:`InfluxWriter` batches points in a background thread and POSTs them to
``/write?db=...&precision=ns``; a missing or failing server is reported once and the points
are dropped. :class:`LocalInfluxd` runs Debian's ``influxd`` from a config in a temp dir with
its data under the results directory.
"""

from __future__ import annotations

import os
import queue
import shutil
import socket
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from udtharness import processes
from udtharness.processes import UNCAPPED

DB = "udtbed"


def _esc(v: str) -> str:
    return str(v).replace("\\", "\\\\").replace(" ", "\\ ").replace(",", "\\,").replace("=", "\\=")


def line(measurement: str, tags: dict[str, str], fields: dict[str, float], ts_ns: int) -> str:
    t = ",".join(f"{_esc(k)}={_esc(v)}" for k, v in sorted(tags.items()) if v != "")
    f = ",".join(f"{_esc(k)}={float(v)!r}" for k, v in fields.items())
    return f"{_esc(measurement)}{',' + t if t else ''} {f} {ts_ns}"


def query(url: str, q: str, db: str = DB, timeout: float = 5) -> dict[str, Any]:
    import json

    u = f"{url}/query?" + urllib.parse.urlencode({"db": db, "q": q})
    with urllib.request.urlopen(u, timeout=timeout) as r:
        out: dict[str, Any] = json.loads(r.read())
    return out


class InfluxWriter:
    def __init__(
        self, url: str | None, db: str = DB, log: Callable[[str], None] = print, batch: int = 500, period: float = 0.5
    ) -> None:
        self.url, self.db, self.log = url, db, log
        self.batch, self.period = batch, period
        self.q: queue.Queue[str | None] = queue.Queue(maxsize=100_000)
        self.failed: str | None = None
        self.written = 0
        self.thread: threading.Thread | None = None
        if url:
            try:
                self._post(f"{url}/query", urllib.parse.urlencode({"q": f"CREATE DATABASE {db}"}).encode())
            except Exception as e:  # noqa: BLE001 - InfluxDB must never fail the run
                self._fail(e)
            self.thread = threading.Thread(target=self._loop, name="influx-writer", daemon=True)
            self.thread.start()

    def _fail(self, e: Exception) -> None:
        if self.failed is None:
            self.failed = str(e)
            self.log(f"  influxdb: {self.url}: {e} (points dropped; the run goes on)")

    def _post(self, url: str, body: bytes) -> None:
        req = urllib.request.Request(url, data=body, method="POST")
        with urllib.request.urlopen(req, timeout=3) as r:
            r.read()

    def write(self, measurement: str, tags: dict[str, str], fields: dict[str, float], ts: float | None = None) -> None:
        if not self.url:
            return
        try:
            self.q.put_nowait(line(measurement, tags, fields, int((ts or time.time()) * 1e9)))
        except queue.Full:
            pass

    def _loop(self) -> None:
        done = False
        while not done:
            lines: list[str] = []
            deadline = time.monotonic() + self.period
            while len(lines) < self.batch:
                try:
                    item = self.q.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:
                    done = True
                    break
                lines.append(item)
            if lines:
                try:
                    self._post(
                        f"{self.url}/write?" + urllib.parse.urlencode({"db": self.db, "precision": "ns"}),
                        "\n".join(lines).encode(),
                    )
                    self.written += len(lines)
                except Exception as e:  # noqa: BLE001
                    self._fail(e)

    def close(self) -> None:
        if self.thread:
            self.q.put(None)
            self.thread.join(timeout=10)
            self.thread = None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


class LocalInfluxd:
    """``influxd`` on 127.0.0.1 with data in ``datadir``; a context manager."""

    def __init__(self, datadir: Path, port: int | None = None) -> None:
        self.datadir = Path(datadir).resolve()
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: processes.StackProcess | None = None
        self.tmp: str | None = None

    def start(self, timeout: float = 10) -> LocalInfluxd:
        exe = shutil.which("influxd")
        if not exe:
            raise RuntimeError("influxd is not installed (Debian package influxdb; make setup)")
        self.datadir.mkdir(parents=True, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix="udtb-influxd-")
        conf = Path(self.tmp) / "influxdb.conf"
        d = self.datadir
        conf.write_text(f"""reporting-disabled = true
bind-address = "127.0.0.1:{_free_port()}"
[meta]
  dir = "{d}/meta"
[data]
  dir = "{d}/data"
  wal-dir = "{d}/wal"
  query-log-enabled = false
[http]
  bind-address = "127.0.0.1:{self.port}"
  log-enabled = false
[monitor]
  store-enabled = false
""")
        # Started as the harness starts every process of a run: its own session, marked with the
        # run's id, so that the runner's cleanup after a crash or Ctrl-C finds it too.
        self.proc = processes.start(
            [exe, "-config", str(conf)], dict(os.environ), log=d / "influxd.log", limits=UNCAPPED
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"influxd exited ({self.proc.returncode}); see {d}/influxd.log")
            try:
                urllib.request.urlopen(f"{self.url}/ping", timeout=0.5).read()
                return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"influxd did not answer on {self.url} within {timeout} s")

    def stop(self) -> None:
        if self.proc:
            processes.stop(self.proc, grace=5.0)
        self.proc = None
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def __enter__(self) -> LocalInfluxd:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False
