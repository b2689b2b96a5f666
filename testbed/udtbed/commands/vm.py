"""``udtbed vm``: a command in a stock kernel that has netem, under QEMU (virtme-ng) or UML
(udtbed.emulation.vm); its output as it comes, its exit status as ours."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from .shared import Command


def cmd_vm(a: argparse.Namespace) -> int:
    """The command in the stock kernel: its output as it comes, its exit status as ours."""
    from ..emulation import vm

    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        print("udtbed vm: no command (udtbed vm [options] -- CMD...)", file=sys.stderr)
        return 2
    rw = [Path(d).resolve() for d in a.rw]
    for d in rw:
        d.mkdir(parents=True, exist_ok=True)
    try:
        r = vm.run(
            command, accel=a.accel, cpus=a.cpus, memory=a.memory, rw=rw, timeout_s=a.timeout, kernel=a.kernel, echo=True
        )
    except vm.VmUnavailable as err:
        print(f"udtbed vm: {err}", file=sys.stderr)
        return 3
    except vm.VmBootFailed as err:
        print(f"udtbed vm: {err}", file=sys.stderr)
        return 4
    except subprocess.TimeoutExpired:
        print(f"udtbed vm: the command ran past --timeout {a.timeout:g} s; the VM was stopped", file=sys.stderr)
        return 124
    except KeyboardInterrupt:
        print("\nudtbed vm: interrupted; the VM was stopped", file=sys.stderr)
        return 130
    print(
        f"udtbed vm: exit {r.rc} in {r.wall_s:.0f} s ({r.kernel} under {r.accel.upper()}, "
        f"{r.cpus} vCPU{'' if r.cpus == 1 else 's'}, "
        f"booted in {r.boot_s:.0f} s; {r.kvm_note})",
        file=sys.stderr,
    )
    if a.record:
        Path(a.record).write_text(json.dumps(r.record(), indent=1) + "\n")
    return r.rc


def add_arguments(v: argparse.ArgumentParser) -> None:
    v.add_argument(
        "--accel",
        default="auto",
        choices=["auto", "kvm", "tcg", "uml"],
        help="auto: KVM where it boots, else TCG; uml: Debian's user-mode Linux (real CPU, one CPU, slow syscalls)",
    )
    v.add_argument("--cpus", type=int, default=2, help="QEMU's vCPUs (default 2; UML has one)")
    v.add_argument("--memory", default="4G")
    v.add_argument("--rw", action="append", default=[], help="a directory the guest may write (repeatable)")
    v.add_argument(
        "--kernel", help="the vmlinuz to boot (default: the newest /boot one with sch_netem); UML: its linux.uml"
    )
    v.add_argument("--timeout", type=float, default=1800.0, help="seconds before the VM is stopped (default 1800)")
    v.add_argument("--record", help="write how it ran (accel, kernel, times, exit) as JSON here")
    v.add_argument("command", nargs=argparse.REMAINDER)


VM = Command(
    "vm", "run a command in a stock kernel that has netem, under QEMU (virtme-ng) or UML", add_arguments, cmd_vm
)
