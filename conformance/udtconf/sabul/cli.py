"""``python -m udtconf.sabul``: the suite's Python SABUL peer on the ``sabul`` command line of
docs/cli.md — the sender listens, the receiver connects::

    python -m udtconf.sabul send --listen ADDR:PORT --input PATH [--rate MBIT] [--min-rate MBIT]
                                 [--max-rate MBIT] [--slow-start on|off]
                                 [--mss N] [--stats PATH] [--stats-interval MS]
    python -m udtconf.sabul recv --connect ADDR:PORT --output PATH [--mss N] [--data-port N]
                                 [--stats PATH] [--stats-interval MS]

``-`` is stdin / stdout. ``--mss`` is the IP packet size: the SABUL packet (UDP payload) is
``MSS − 28`` bytes (1472 by default, SABUL.md §3.1). Exit status: 0 success, 2 usage,
3 set-up failed, 4 local I/O, 5 broken mid-transfer.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import BinaryIO, TextIO

from . import rate
from .driver import EXIT_IO, EXIT_USAGE, SessionError, parse_address, receive, send
from .peer import ReceiverConfig, SenderConfig
from .wire import MAX_PKT_SIZE, MIN_PKT_SIZE

IP_UDP_HEADERS = 28


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m udtconf.sabul", description="The conformance suite's SABUL peer.")
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("send", help="listen on TCP, wait for one receiver, send the input")
    s.add_argument("--listen", required=True, metavar="ADDR:PORT")
    s.add_argument("--input", required=True, metavar="PATH", help="file to send, - for stdin")
    s.add_argument("--rate", type=float, metavar="MBIT", help="initial rate in Mb/s (SABUL.md §7.1; default 10 µs)")
    s.add_argument("--min-rate", type=float, metavar="MBIT", help="SABUL.md §7.1: I_max as a rate (default 12)")
    s.add_argument("--max-rate", type=float, metavar="MBIT", help="SABUL.md §7.1: I_min as a rate (default 1200)")
    s.add_argument("--slow-start", choices=("on", "off"), default="on", help="SABUL.md §8 (off = the 2003 code)")
    r = sub.add_parser("recv", help="connect to a sender and write what arrives")
    r.add_argument("--connect", required=True, metavar="ADDR:PORT")
    r.add_argument("--output", required=True, metavar="PATH", help="file to write, - for stdout")
    r.add_argument("--data-port", type=int, default=0, metavar="N", help="UDP data port (default: any free)")
    for p in (s, r):
        add_common(p)
    return ap


def add_common(p: argparse.ArgumentParser) -> None:
    """--mss, --stats, --stats-interval (the sabul command line and those built on it, docs/cli.md)."""
    p.add_argument("--mss", type=int, default=1500, metavar="N", help="IP packet size; packet = N − 28")
    p.add_argument("--stats", metavar="PATH", help="JSON lines (docs/cli.md), - for stdout")
    p.add_argument("--stats-interval", type=float, default=100.0, metavar="MS")


def packet_size(ap: argparse.ArgumentParser, mss: int) -> int:
    """The SABUL packet for ``--mss`` (MSS − 28), or a usage error."""
    pkt_size = mss - IP_UDP_HEADERS
    if not MIN_PKT_SIZE <= pkt_size <= MAX_PKT_SIZE:
        ap.error(f"--mss {mss}: the packet (MSS − 28) must be {MIN_PKT_SIZE}…{MAX_PKT_SIZE} bytes")
    return pkt_size


Body = Callable[[ExitStack, TextIO | None, float], None]


def run_session(prog: str, args: argparse.Namespace, body: Body) -> int:
    """Opens ``--stats`` (``-``: standard output, standard error when the data goes there), runs
    ``body(files, stats, interval)`` and maps its failure to docs/cli.md's exit status."""
    with ExitStack() as files:
        try:
            stats: TextIO | None = None
            if args.stats == "-":
                stats = sys.stderr if getattr(args, "output", None) == "-" else sys.stdout
            elif args.stats:
                stats = files.enter_context(open(args.stats, "w"))
            body(files, stats, args.stats_interval / 1000)
        except OSError as e:
            print(f"{prog} {args.command}: {e}", file=sys.stderr)
            return EXIT_IO
        except SessionError as e:
            print(f"{prog} {args.command}: {e}", file=sys.stderr)
            return e.code
        except KeyboardInterrupt:
            return 130
    return 0


def open_input(files: ExitStack, path: str) -> BinaryIO:
    return sys.stdin.buffer if path == "-" else files.enter_context(open(path, "rb"))


def open_output(files: ExitStack, path: str) -> BinaryIO:
    return sys.stdout.buffer if path == "-" else files.enter_context(open(path, "wb"))


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    pkt_size = packet_size(ap, args.mss)
    if args.command == "recv" and args.output == "-" and args.stats == "-":
        ap.error("--stats - and --output - both want stdout")
    if args.command == "send":
        for opt in ("rate", "min_rate", "max_rate"):
            if getattr(args, opt) is not None and not getattr(args, opt) > 0:
                ap.error(f"--{opt.replace('_', '-')} must be a positive number of Mb/s")
        if args.min_rate and args.max_rate and args.min_rate > args.max_rate:
            ap.error("--min-rate must not be above --max-rate")
    try:
        address = parse_address(args.listen if args.command == "send" else args.connect)
    except ValueError as e:
        ap.error(str(e))

    def body(files: ExitStack, stats: TextIO | None, interval: float) -> None:
        if args.command == "send":
            config = SenderConfig(
                pkt_size=pkt_size,
                interval_us=rate.interval_for_rate(args.rate) if args.rate else rate.DEFAULT_INTERVAL,
                slow_start=args.slow_start == "on",
                i_min=rate.interval_for_rate(args.max_rate) if args.max_rate else rate.I_MIN,
                i_max=rate.interval_for_rate(args.min_rate) if args.min_rate else rate.I_MAX,
            )
            send(address, open_input(files, args.input), config, stats, interval)
        else:
            sink = open_output(files, args.output)
            receive(address, sink, ReceiverConfig(pkt_size=pkt_size), stats, interval, data_port=args.data_port)

    return run_session("sabul", args, body)


__all__ = ["main", "EXIT_USAGE"]
