"""Small traffic tools run inside the hosts' namespaces (``python -m udtbed.emulation.probe ...``).

- ``udp-sink`` / ``udp-source``: a paced UDP blast of full-size frames offered above the
  bottleneck rate; the sink reports the arrival span, from which calibration computes the link
  rate at L2 (1514-byte frames, as the emulator and tc count).
- ``train-sink`` / ``train``: numbered datagrams (sequence and send time in each), sent at a
  rate or back to back, one by one or as UDP GSO batches; the sink reports what arrived: losses
  and their run lengths, reordering, one-way delays (both ends share the kernel's clock, as the
  hosts of one machine's namespaces do). The link checks of the netem stage use these.
- ``tcp-sink`` / ``tcp-short``: short TCP transfers of a fixed size (SC'04 Fig. 13's 1 MB flows);
  each flow's completion time is measured by the sender up to the sink's one-byte reply.

Every command prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import errno
import json
import socket
import statistics
import struct
import sys
import threading
import time
from typing import TypedDict

PAYLOAD = 1472  # 1514-byte frame


class UdpSinkResult(TypedDict):
    packets: int
    span_s: float  # first to last arrival
    bunched: int  # arrivals less than half a serialization time after the previous one


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


def udp_sink(port: int, seconds: float, ptime_s: float = 0.0) -> UdpSinkResult:
    """Counts a blast's datagrams until 1 s after the last. With the bottleneck busy they arrive
    one serialization time (``ptime_s``) apart: those closer than half of it were released in a
    bunch (a late timer in the link emulation), which receivers timing arrivals read as a faster
    link."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind(("0.0.0.0", port))
    s.settimeout(seconds)
    buf = bytearray(65536)
    n, first, last, bunched = 0, None, 0.0, 0
    print(json.dumps({"ready": True}), flush=True)
    try:
        while True:
            k = s.recv_into(buf)
            now = time.monotonic()
            if first is None:
                first = now
                s.settimeout(1.0)  # the source is running: stop 1 s after it goes quiet
            elif now - last < ptime_s / 2:
                bunched += 1
            last = now
            n += 1 if k else 0
    except TimeoutError:
        pass
    return {"packets": n, "span_s": (last - first) if first is not None and n > 1 else 0.0, "bunched": bunched}


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


def _buffer(s: socket.socket, option: int, forced: int, size: int) -> None:
    """``size`` bytes of socket buffer: past net.core.[rw]mem_max with the FORCE option where
    this process may (root in its namespace), so that a train's receiver on a slow or loaded
    machine (an emulated VM) drops nothing of its own; else as much as the cap allows."""
    try:
        s.setsockopt(socket.SOL_SOCKET, forced, size)
    except PermissionError:
        s.setsockopt(socket.SOL_SOCKET, option, size)


TRAIN_HEADER = struct.Struct("!IQ")  # sequence, send time (CLOCK_MONOTONIC, ns)
UDP_SEGMENT = 103  # linux/udp.h: the socket option that makes one send a GSO batch
SO_SNDBUFFORCE, SO_RCVBUFFORCE = 32, 33  # asm-generic/socket.h


class TrainSinkResult(TypedDict):
    received: int
    highest: int  # highest sequence seen, -1 if none
    lost: int  # sequences below the highest that never arrived
    loss_runs: dict[str, int]  # run length -> how many runs of consecutive losses
    reordered: int  # arrivals below a sequence already seen
    duplicates: int
    owd_ms: list[float]  # one-way delay of each arrival, in arrival order
    span_s: float  # first to last arrival


class TrainResult(TypedDict):
    sent: int
    seconds: float
    gso: int
    gso_refused: bool  # the kernel refused a GSO send (EIO: no checksum offload): sent one by one


def train_sink(port: int, seconds: float, quiet_s: float) -> TrainSinkResult:
    """Counts a train until ``quiet_s`` after its last datagram (or ``seconds`` without any)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    _buffer(s, socket.SO_RCVBUF, SO_RCVBUFFORCE, 32 << 20)
    s.bind(("0.0.0.0", port))
    s.settimeout(seconds)
    buf = bytearray(65536)
    seen: set[int] = set()
    highest, reordered, dups = -1, 0, 0
    owd: list[float] = []
    first: float | None = None
    last = 0.0
    print(json.dumps({"ready": True}), flush=True)
    try:
        while True:
            k = s.recv_into(buf)
            now_ns = time.monotonic_ns()
            if k < TRAIN_HEADER.size:
                continue
            if first is None:
                first = now_ns / 1e9
                s.settimeout(quiet_s)
            last = now_ns / 1e9
            seq, sent_ns = TRAIN_HEADER.unpack_from(buf)
            owd.append(round((now_ns - sent_ns) / 1e6, 4))
            if seq in seen:
                dups += 1
                continue
            seen.add(seq)
            if seq < highest:
                reordered += 1
            highest = max(highest, seq)
    except TimeoutError:
        pass
    runs: dict[str, int] = {}
    run = 0
    for i in range(highest + 1):
        if i in seen:
            if run:
                runs[str(run)] = runs.get(str(run), 0) + 1
            run = 0
        else:
            run += 1
    return {
        "received": len(seen),
        "highest": highest,
        "lost": highest + 1 - len(seen),
        "loss_runs": runs,
        "reordered": reordered,
        "duplicates": dups,
        "owd_ms": owd,
        "span_s": last - first if first is not None else 0.0,
    }


def train(dst: str, port: int, count: int, rate_bps: float, gso: int) -> TrainResult:
    """``count`` numbered 1514-byte frames at ``rate_bps`` (0: as fast as the socket takes them),
    ``gso`` datagrams per send where above 1 (one UDP GSO batch, segmented below the socket)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    _buffer(s, socket.SO_SNDBUF, SO_SNDBUFFORCE, 32 << 20)
    if gso > 1:
        s.setsockopt(socket.IPPROTO_UDP, UDP_SEGMENT, PAYLOAD)
    s.connect((dst, port))
    pps = rate_bps / (1514 * 8) if rate_bps else 0.0
    pad = bytes(PAYLOAD - TRAIN_HEADER.size)
    t0 = time.monotonic()
    sent = 0
    refused = False
    while sent < count:
        if pps:
            ahead = sent - (time.monotonic() - t0) * pps
            if ahead >= 1:
                time.sleep(min(ahead / pps, 0.01))
                continue
        n = min(max(gso, 1), count - sent)
        now = time.monotonic_ns()
        batch = b"".join(TRAIN_HEADER.pack(sent + i, now) + pad for i in range(n))
        try:
            s.send(batch)
        except (BlockingIOError, ConnectionRefusedError):
            continue
        except OSError as e:
            if e.errno != errno.EIO or gso <= 1:
                raise
            # UDP GSO needs checksum offload on the route's device; like our UDT runtime, go on
            # without it.
            refused, gso = True, 1
            s.setsockopt(socket.IPPROTO_UDP, UDP_SEGMENT, 0)
            continue
        sent += n
    return {"sent": sent, "seconds": time.monotonic() - t0, "gso": gso, "gso_refused": refused}


def owd_summary(owd_ms: list[float]) -> dict[str, float]:
    """min, median and max of one-way delays (ms)."""
    return {"min": min(owd_ms), "median": statistics.median(owd_ms), "max": max(owd_ms)} if owd_ms else {}


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
    ap = argparse.ArgumentParser(prog="udtbed.emulation.probe")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("udp-sink")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--ptime-us", type=float, default=0.0, help="the bottleneck's serialization time (bunching)")
    p = sub.add_parser("udp-source")
    p.add_argument("--dst", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--seconds", type=float, default=2)
    p = sub.add_parser("train-sink")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--quiet", type=float, default=2.0, help="stop this long after the last datagram")
    p = sub.add_parser("train")
    p.add_argument("--dst", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--rate", type=float, default=0.0, help="bit/s at L2 (0: back to back)")
    p.add_argument("--gso", type=int, default=1, help="datagrams per send (UDP GSO above 1)")
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
    r: UdpSinkResult | UdpSourceResult | TrainSinkResult | TrainResult | TcpSinkResult | TcpShortResult
    if a.cmd == "train-sink":
        r = train_sink(a.port, a.seconds, a.quiet)
    elif a.cmd == "train":
        r = train(a.dst, a.port, a.count, a.rate, a.gso)
    elif a.cmd == "udp-sink":
        r = udp_sink(a.port, a.seconds, a.ptime_us / 1e6)
    elif a.cmd == "udp-source":
        r = udp_source(a.dst, a.port, a.rate, a.seconds)
    elif a.cmd == "tcp-sink":
        r = tcp_sink(a.port, a.seconds)
    else:
        r = tcp_short(a.dst, a.port, a.size, a.count, a.workers, a.cc, a.seconds)
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
