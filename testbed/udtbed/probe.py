"""Small traffic tools run inside the hosts' namespaces (``python -m udtbed.probe ...``).

- ``udp-sink`` / ``udp-source``: a paced UDP blast of full-size frames offered above the
  bottleneck rate; the sink reports the arrival span, from which calibration computes the link
  rate at L2 (1514-byte frames, as the emulator and tc count).
- ``tcp-sink`` / ``tcp-short``: short TCP transfers of a fixed size (SC'04 Fig. 13's 1 MB flows);
  each flow's completion time is measured by the sender up to the sink's one-byte reply.

Every command prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from typing import TypedDict

PAYLOAD = 1472  # 1514-byte frame


class UdpSinkResult(TypedDict):
    packets: int
    span_s: float  # first to last arrival


class UdpSourceResult(TypedDict):
    sent: int
    seconds: float


class TcpSinkResult(TypedDict):
    served: int


class TcpFlow(TypedDict):
    start: float  # seconds since the sender started
    end: float  # the sink's one-byte reply arrived
    bytes: int


class TcpShortResult(TypedDict):
    flows: list[TcpFlow]  # completed flows only
    wall_s: float
    aggregate_mbps: float


def udp_sink(port: int, seconds: float) -> UdpSinkResult:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind(("0.0.0.0", port))
    s.settimeout(seconds)
    buf = bytearray(65536)
    n, first, last = 0, None, 0.0
    print(json.dumps({"ready": True}), flush=True)
    try:
        while True:
            k = s.recv_into(buf)
            now = time.monotonic()
            if first is None:
                first = now
                s.settimeout(1.0)  # the source is running: stop 1 s after it goes quiet
            last = now
            n += 1 if k else 0
    except TimeoutError:
        pass
    return {"packets": n, "span_s": (last - first) if first is not None and n > 1 else 0.0}


def udp_source(dst: str, port: int, rate_bps: float, seconds: float) -> UdpSourceResult:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    s.connect((dst, port))
    payload = bytes(PAYLOAD)
    pps = rate_bps / (1514 * 8)
    t0 = time.monotonic()
    sent = 0
    while True:
        now = time.monotonic()
        if now - t0 >= seconds:
            break
        due = int((now - t0) * pps) + 1
        while sent < due:
            try:
                s.send(payload)
            except (BlockingIOError, ConnectionRefusedError):
                pass
            sent += 1
        time.sleep(0.0005)
    return {"sent": sent, "seconds": time.monotonic() - t0}


def tcp_sink(port: int, seconds: float) -> TcpSinkResult:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(128)
    srv.settimeout(seconds)
    print(json.dumps({"ready": True}), flush=True)
    served = 0

    def serve(c: socket.socket) -> None:
        buf = bytearray(1 << 20)
        with c:
            while c.recv_into(buf):
                pass
            c.sendall(b"k")

    try:
        while True:
            c, _ = srv.accept()
            served += 1
            threading.Thread(target=serve, args=(c,), daemon=True).start()
    except TimeoutError:
        pass
    return {"served": served}


def tcp_short(dst: str, port: int, size: int, count: int, workers: int, cc: str, seconds: float) -> TcpShortResult:
    """``count`` transfers of ``size`` bytes, ``workers`` at a time, until ``seconds`` pass."""
    data = bytes(size)
    flows: list[TcpFlow] = []
    lock = threading.Lock()
    t0 = time.monotonic()
    todo = iter(range(count))

    def worker() -> None:
        while time.monotonic() - t0 < seconds:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            start = time.monotonic()
            try:
                c = socket.create_connection((dst, port), timeout=30)
                c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
                c.sendall(data)
                c.shutdown(socket.SHUT_WR)
                ok = c.recv(1) == b"k"
                c.close()
            except OSError as e:
                print(f"tcp-short: flow {i}: {e}", file=sys.stderr)
                ok = False
            end = time.monotonic()
            if ok:
                with lock:
                    flows.append({"start": start - t0, "end": end - t0, "bytes": size})

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    total = sum(f["bytes"] for f in flows)
    return {"flows": flows, "wall_s": wall, "aggregate_mbps": total * 8 / wall / 1e6 if wall else 0.0}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="udtbed.probe")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("udp-sink")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--seconds", type=float, default=10)
    p = sub.add_parser("udp-source")
    p.add_argument("--dst", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--seconds", type=float, default=2)
    p = sub.add_parser("tcp-sink")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--seconds", type=float, default=60)
    p = sub.add_parser("tcp-short")
    p.add_argument("--dst", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--size", type=int, default=1 << 20)
    p.add_argument("--count", type=int, default=500)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--cc", default="cubic")
    p.add_argument("--seconds", type=float, default=30)
    a = ap.parse_args(argv)
    r: UdpSinkResult | UdpSourceResult | TcpSinkResult | TcpShortResult
    if a.cmd == "udp-sink":
        r = udp_sink(a.port, a.seconds)
    elif a.cmd == "udp-source":
        r = udp_source(a.dst, a.port, a.rate, a.seconds)
    elif a.cmd == "tcp-sink":
        r = tcp_sink(a.port, a.seconds)
    else:
        r = tcp_short(a.dst, a.port, a.size, a.count, a.workers, a.cc, a.seconds)
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
