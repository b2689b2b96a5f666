"""``python -m udtbed``: run experiments, check topology files, calibrate, clean up.

udtbed run [--experiments efficiency,fairness,join,friendliness] [--scale 0.1|auto]
           [--duration 20] [--stacks udt-rs,libudt,sabul,frtp,tcp-cubic,tcp-bbr,tcp-reno] [--backend auto]
           [--influx local|none|URL] [--calibration refuse|flag] [--results results/testbed]
           [--runtime netns|docker] [--image udtbed-stacks] [--cpuset CPUS] [--pin auto|on|off]
           [--cores refuse|flag] [--simulate full|quick|none] [--servers servers.toml]
udtbed preflight --servers servers.toml [--experiments ...]   check the servers a cluster run would use
udtbed lab up|down DIR [--names sender,delay,receiver] [--mtu 1500]   servers on this machine (sshd in namespaces)
udtbed cores [--experiments ...] [--scale 1] [--cpuset CPUS] [--servers FILE]   the cores each part needs,
             and whether it fits (on each server of FILE)
udtbed check topologies/*.toml     validate topology files (file:line: error)
udtbed calibrate TOPO SRC DST [--scale S]
udtbed cleanup [--prefix udtb-PID-] [--all] [--servers FILE]   remove the udtb-* namespaces and containers
               of runs that are gone (here, and on the servers of FILE)
udtbed simulate [--only sc04-fig2,...] [--quick] [--results results/sim]   the papers' NS-2 figures, simulated
udtbed compare-backends [--scale 0.02] [--seconds 20] [--out FILE]   netem beside udt-linkem on each path class
udtbed vm [--accel auto|kvm|tcg|uml] [--rw DIR] [--record FILE] -- CMD...   CMD in a kernel with netem (QEMU, UML)
"""

from __future__ import annotations

import argparse
import io
import sys

from .commands import COMMANDS


def main(argv: list[str] | None = None) -> int:
    """The subcommand the command line names, run: its exit status (2 for a command line that
    argparse refuses). The parser is built from :data:`udtbed.commands.COMMANDS`, in its order."""
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)  # progress as it goes, also into a pipe or a log
    ap = argparse.ArgumentParser(
        prog="udtbed", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    for command in COMMANDS:
        command.arguments(sub.add_parser(command.name, help=command.help))
    a = ap.parse_args(argv)
    handle = {command.name: command.handle for command in COMMANDS}[a.cmd]
    return handle(a)


if __name__ == "__main__":
    sys.exit(main())
