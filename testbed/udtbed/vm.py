"""A stock kernel in a VM: where a machine's own kernel lacks ``sch_netem``, run a command there.

Our machines' kernel has no netem, yet ``BACKEND=auto`` picks netem on nearly every user's Linux
machine. Debian's ``linux-image-amd64`` has it as a module. ``virtme-ng`` (``vng``, from PyPI)
boots that kernel in QEMU with the host's filesystem shared read-only as the guest's root, runs
one command and returns its exit status; ``/tmp`` and ``/run`` are the guest's own, and the
directories given as ``rw`` are shared writable, so that results come back. Nothing of the
host's kernel, modules or network is touched: the guest's namespaces, qdiscs and sysctls live
and die with the guest.

Acceleration: KVM where it works, else QEMU's TCG emulation. ``accel="auto"`` uses TCG at once
where the CPU has no hardware virtualisation (no ``vmx``/``svm``: a ``/dev/kvm`` there, such as
our machines' ``kvm_pvm``, would emulate the guest); elsewhere it first boots KVM with a trivial
command and falls back to TCG, recording why. TCG is slow and its
timers jitter: good for proving the netem path works at low rates, not for judging fidelity at
the papers' rates (docs/testbed/backends.md, "The netem backend in a VM").
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from udtharness import processes

# Markers the guest prints around the command, so that a boot that never reached it and a guest
# that died in it are told apart from a command that failed.
BOOTED = "UDTBED-VM-BOOTED"
EXIT = "UDTBED-VM-EXIT="
# The environment the command inherits from the caller (the guest starts with init's own).
PASS_ENV = re.compile(r"^(PATH|HOME|LANG|LC_ALL|TERM|UDT_.*|UDTBED_.*|UDTC_.*|STACKS|CASES|PYTHONPATH)$")
KVM_PROBE_S = 60.0


class VmUnavailable(RuntimeError):
    """The VM cannot be started here: a tool or a kernel is missing (the message says which)."""


class VmBootFailed(RuntimeError):
    """QEMU ran but the guest never reached the command, or died before it finished."""


@dataclass
class VmRun:
    """One command in the VM: its exit status, how the guest was accelerated, and its output."""

    rc: int
    accel: str  # "kvm" or "tcg"
    kernel: str
    cpus: int
    memory: str
    wall_s: float
    boot_s: float | None  # until the guest printed BOOTED
    kvm_note: str  # why KVM was or was not used
    output: str = field(repr=False)

    def record(self) -> dict[str, object]:
        """What a results file keeps of the run (not its output)."""
        return {
            "rc": self.rc,
            "accel": self.accel,
            "kernel": self.kernel,
            "cpus": self.cpus,
            "memory": self.memory,
            "wall_s": round(self.wall_s, 1),
            "boot_s": None if self.boot_s is None else round(self.boot_s, 1),
            "kvm_note": self.kvm_note,
        }


def vng_path() -> str:
    """``vng`` beside the running interpreter (the virtualenv's), else on PATH."""
    import sys

    here = Path(sys.executable).parent / "vng"
    if here.exists():
        return str(here)
    found = shutil.which("vng")
    if not found:
        raise VmUnavailable("virtme-ng's `vng` is not installed: run `make setup` (it installs virtme-ng into .venv)")
    return found


def find_kernel(explicit: str | None = None) -> tuple[Path, str]:
    """(vmlinuz, release) of a stock kernel whose modules include sch_netem: ``explicit`` (or
    $UDTBED_VM_KERNEL) if given, else the newest ``/boot/vmlinuz-*`` with such modules."""
    want = explicit or os.environ.get("UDTBED_VM_KERNEL")
    candidates = [Path(want)] if want else sorted(Path("/boot").glob("vmlinuz-*"), reverse=True)
    why: list[str] = []
    for k in candidates:
        if not k.is_file():
            why.append(f"{k} does not exist")
            continue
        release = k.name.removeprefix("vmlinuz-")
        mods = Path("/lib/modules") / release
        if not any((mods / "kernel/net/sched").glob("sch_netem.ko*")):
            why.append(f"{k}: no sch_netem module under {mods}")
            continue
        return k, release
    detail = "; ".join(why) or "no /boot/vmlinuz-* at all"
    raise VmUnavailable(
        f"no stock kernel with netem to boot ({detail}): run `make setup` (it installs Debian's "
        "linux-image-amd64), or name one with UDTBED_VM_KERNEL=/boot/vmlinuz-RELEASE"
    )


def check_tools() -> None:
    missing = [t for t in ("qemu-system-x86_64",) if not shutil.which(t)]
    if not Path("/bin/busybox").exists() and not shutil.which("busybox"):
        missing.append("busybox (busybox-static)")
    if missing:
        raise VmUnavailable(
            f"missing {', '.join(missing)}: run `make setup` (Debian's qemu-system-x86, busybox-static)"
        )


def _guest_script(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
    return f"echo {BOOTED}; cd {shlex.quote(str(cwd))} && env {exports} {shlex.join(command)}; echo {EXIT}$?"


def _boot(
    kernel: Path,
    script: str,
    *,
    kvm: bool,
    cpus: int,
    memory: str,
    rw: list[Path],
    timeout_s: float,
    echo: bool,
) -> tuple[int, str, float, float | None]:
    """Runs vng once: (vng's exit status, output, wall seconds, seconds until BOOTED or None)."""
    cmd = [vng_path(), "--run", str(kernel), "--cpus", str(cpus), "--memory", memory, "--quiet"]
    if not kvm:
        cmd.append("--disable-kvm")
    for d in rw:
        cmd.append(f"--rwdir={d}")
    cmd += ["--", script]
    env = dict(os.environ)
    env["PATH"] = f"{Path(cmd[0]).parent}:{env.get('PATH', '/usr/bin:/bin')}"  # vng calls virtme-run by name
    env[processes.MARK_VAR] = processes.RUN_ID  # as every process of a run: a cleanup's sweep finds it
    t0 = time.monotonic()
    # Its own session, so that a timeout or Ctrl-C takes QEMU and every helper with it.
    p = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd="/",
        env=env,
    )
    out: list[str] = []
    booted: float | None = None
    try:
        assert p.stdout is not None
        deadline = t0 + timeout_s
        os.set_blocking(p.stdout.fileno(), False)
        buf = b""
        while True:
            chunk = p.stdout.read()
            if chunk:
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for raw in lines:
                    line = raw.decode(errors="replace").rstrip("\r")
                    out.append(line)
                    if booted is None and BOOTED in line:
                        booted = time.monotonic() - t0
                    if echo and booted is not None and BOOTED not in line and not line.startswith(EXIT):
                        print(line, flush=True)
            elif p.poll() is not None:
                break
            else:
                time.sleep(0.05)
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(cmd, timeout_s)
        if buf:
            out.append(buf.decode(errors="replace"))
    except BaseException:
        _kill(p)
        raise
    return p.returncode, "\n".join(out), time.monotonic() - t0, booted


def _kill(p: subprocess.Popen[bytes]) -> None:
    """QEMU and every helper of vng's session: SIGTERM, then SIGKILL (the harness's stop)."""
    processes.stop(p, grace=5.0)


def _exit_status(output: str) -> int | None:
    found = re.findall(rf"{EXIT}(\d+)", output)
    return int(found[-1]) if found else None


def kvm_without_hardware(cpuinfo: str, modules: set[str]) -> str | None:
    """Why KVM here cannot run a stock kernel on the CPU, from ``/proc/cpuinfo``'s text and the
    loaded modules' names; None where it may.

    A CPU without ``vmx`` or ``svm`` has no hardware virtualisation, so a ``/dev/kvm`` on it
    is a software hypervisor. Our machines' is ``kvm_pvm`` (a Firecracker guest loaded with
    ``nested_pvm=1``): it runs only a guest kernel built for PVM directly and emulates an
    ordinary one instruction by instruction, ~1 M instructions/s, until KVM's emulator meets
    ``cmpxchg16b``, ``xrstor`` or ``int3`` (docs/results/2026-11-28-kvm-pvm.md)."""
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.partition(":")[2].split())
    if flags & {"vmx", "svm"}:
        return None
    if "kvm_pvm" in modules:
        return (
            "/dev/kvm is kvm_pvm, a software hypervisor (the CPU has no vmx/svm): a stock kernel "
            "would run emulated, slower than TCG"
        )
    return "the CPU has no vmx/svm (no hardware virtualisation)"


def _loaded_modules() -> set[str]:
    """The kernel's modules, loaded or built in (``/sys/module``; our machines have no
    ``/proc/modules``)."""
    try:
        return {p.name for p in Path("/sys/module").iterdir()}
    except OSError:
        return set()


def kvm_usable(kernel: Path, cpus: int, memory: str) -> tuple[bool, str]:
    """Whether this kernel boots under KVM here: none where the CPU lacks hardware
    virtualisation (:func:`kvm_without_hardware`), else one trivial command, at most
    KVM_PROBE_S."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "no usable /dev/kvm"
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    why = kvm_without_hardware(cpuinfo, _loaded_modules()) if cpuinfo else None
    if why:
        return False, why
    try:
        rc, out, wall, booted = _boot(
            kernel,
            _guest_script(["true"], Path("/"), {}),
            kvm=True,
            cpus=cpus,
            memory=memory,
            rw=[],
            timeout_s=KVM_PROBE_S,
            echo=False,
        )
    except subprocess.TimeoutExpired:
        return False, f"KVM boot hung (no answer in {KVM_PROBE_S:.0f} s)"
    if booted is not None and _exit_status(out) == 0:
        return True, f"KVM booted in {booted:.1f} s"
    tail = [ln for ln in out.splitlines() if ln.strip()][-2:]
    return False, f"KVM boot failed (vng exit {rc}): {' / '.join(tail) or 'no output'}"


def run(
    command: list[str],
    *,
    accel: str = "auto",
    cpus: int = 2,
    memory: str = "4G",
    rw: list[Path] | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float = 1800.0,
    kernel: str | None = None,
    echo: bool = False,
) -> VmRun:
    """``command`` in the stock kernel, as root, in ``cwd`` (default: here), with the caller's
    PATH and UDT*/UDTBED* settings plus ``env``; ``rw`` directories are writable there.

    Raises VmUnavailable (missing tools or kernel), VmBootFailed (the guest never reached the
    command or died in it: the message names the acceleration and QEMU's last words) and
    TimeoutExpired (the VM is stopped first)."""
    if accel not in ("auto", "kvm", "tcg"):
        raise ValueError(f"accel {accel!r}: want auto, kvm or tcg")
    check_tools()
    vmlinuz, release = find_kernel(kernel)
    vng_path()
    if accel == "tcg":
        use_kvm, note = False, "TCG requested"
    else:
        use_kvm, note = kvm_usable(vmlinuz, cpus, memory)
        if not use_kvm and accel == "kvm":
            raise VmBootFailed(f"KVM requested but {note}; use accel tcg (--accel tcg)")
    guest_env = {k: v for k, v in os.environ.items() if PASS_ENV.match(k)} | (env or {})
    script = _guest_script(command, cwd or Path.cwd(), guest_env)
    rc, out, wall, booted = _boot(
        vmlinuz, script, kvm=use_kvm, cpus=cpus, memory=memory, rw=list(rw or []), timeout_s=timeout_s, echo=echo
    )
    name = "kvm" if use_kvm else "tcg"
    status = _exit_status(out)
    if booted is None or status is None:
        tail = "\n".join([ln for ln in out.splitlines() if ln.strip()][-15:])
        where = "never reached the command" if booted is None else "died before the command finished"
        raise VmBootFailed(
            f"the {release} guest under {name.upper()} {where} (vng exit {rc}); its last output:\n{tail}"
        )
    body = out.split(BOOTED, 1)[1].split("\n", 1)[-1]
    body = re.sub(rf"(?m)^.*{EXIT}\d+.*$\n?", "", body)
    return VmRun(status, name, release, cpus, memory, wall, booted, note, body)
