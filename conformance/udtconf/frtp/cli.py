"""``python -m udtconf.frtp``: the suite's Python FRTP peer on the ``frtp`` command line of
docs/cli.md — the sender listens on its control address, the receiver connects, announces its
data address and asks for a rate::

    python -m udtconf.frtp send --listen CTRL:PORT --input PATH [--max-rate MBIT] [--frtp-buffer B]
                                [--udp-buffer B] [--mss N] [--stats PATH] [--stats-interval MS]
    python -m udtconf.frtp recv --connect CTRL:PORT --data-bind DATA_IP:PORT --rate MBIT --output PATH
                                [--udp-buffer B] [--frtp-buffer B] [--mss N] [--stats PATH] [--stats-interval MS]

Exit status as ``frtp``'s: 0 success, 2 usage, 3 set-up failed (a refused rate included),
4 local I/O, 5 broken mid-transfer. ``--udp-buffer`` is accepted for the command line's sake;
the driver keeps its own socket buffers.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from contextlib import ExitStack
from typing import TextIO

from ..sabul.cli import add_common, open_input, open_output, packet_size, run_session
from ..sabul.driver import parse_address, receive, send
from ..sabul.peer import ReceiverConfig, SenderConfig
from ..sabul.wire import DEFAULT_BUF_SIZE
from .peer import FrtpSender, make_receiver


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m udtconf.frtp", description="The conformance suite's FRTP peer.")
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("send", help="listen on TCP, wait for one receiver, send the input at the rate it asks")
    s.add_argument("--listen", required=True, metavar="CTRL:PORT")
    s.add_argument("--input", required=True, metavar="PATH", help="file to send, - for stdin")
    s.add_argument("--max-rate", type=float, default=10000.0, metavar="MBIT", help="refuse a higher rate")
    r = sub.add_parser("recv", help="connect, ask for a rate, write what arrives on the data address")
    r.add_argument("--connect", required=True, metavar="CTRL:PORT")
    r.add_argument("--data-bind", required=True, metavar="DATA_IP:PORT", help="0.0.0.0 = the control address")
    r.add_argument("--rate", required=True, type=float, metavar="MBIT")
    r.add_argument("--output", required=True, metavar="PATH", help="file to write, - for stdout")
    for p in (s, r):
        p.add_argument("--udp-buffer", type=int, default=262144, metavar="BYTES")
        p.add_argument("--frtp-buffer", type=int, default=DEFAULT_BUF_SIZE, metavar="BYTES")
        add_common(p)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    pkt_size = packet_size(ap, args.mss)
    rate = args.max_rate if args.command == "send" else args.rate
    if not rate > 0:
        ap.error("the rate must be a positive number of Mbit/s")
    try:
        address = parse_address(args.listen if args.command == "send" else args.connect)
        data = parse_address(args.data_bind) if args.command == "recv" else ("", 0)
    except ValueError as e:
        ap.error(str(e))
    bps = round(rate * 1e6)

    def body(files: ExitStack, stats: TextIO | None, interval: float) -> None:
        if args.command == "send":
            config = SenderConfig(pkt_size=pkt_size, slow_start=False)
            source = open_input(files, args.input)
            send(
                address,
                source,
                config,
                stats,
                interval,
                make_sender=lambda read, cfg: FrtpSender(read, cfg, bps, args.frtp_buffer),
            )
        else:
            receive(
                address,
                open_output(files, args.output),
                ReceiverConfig(pkt_size=pkt_size),
                stats,
                interval,
                data_port=data[1],
                data_ip=None if data[0] in ("0.0.0.0", "") else data[0],
                make_receiver=make_receiver(bps),
            )

    return run_session("frtp", args, body)


__all__ = ["main"]
