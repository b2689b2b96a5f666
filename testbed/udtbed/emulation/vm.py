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

A third way, ``accel="uml"``: Debian's user-mode Linux (``user-mode-linux``, a 6.1 kernel built
as a host program, ``/usr/bin/linux.uml``, its modules under ``/usr/lib/uml/modules``). Its code
runs on the real CPU, not emulated, where our machines can run no KVM guest; but it has one CPU,
and every system call of a guest process is trapped with ``ptrace`` (tens of microseconds). No
virtme-ng here: the guest's root is the host's ``/`` through ``hostfs``, mounted read-only, and
its PID 1 is a script of ours (:func:`uml_init_script`) that mounts tmpfs over the directories a
run writes (``/run``, ``/tmp``, ...), each ``rw`` directory writable through a hostfs mount of its
own, links the UML module tree in and loads what the netem backend builds with.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
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
ACCELS = ("auto", "kvm", "tcg", "uml")

# User-mode Linux: Debian's package puts the kernel here, and its modules beside it.
UML_BINARY = Path("/usr/bin/linux.uml")
UML_MODULES = Path("/usr/lib/uml/modules")
# What the netem backend builds with (udtbed.emulation.network) that the UML kernel has as modules, where the
# stock kernel has some built in: ipv6 too, since every node's ``sysctl net.ipv6...`` must succeed.
UML_GUEST_MODULES = ("sch_netem", "sch_tbf", "veth", "bridge", "ipv6")
# The guest's own tmpfs over the host's directories that a run writes: the root is the host's,
# read-only, and ``ip netns add`` (/run/netns), pytest (/tmp) and the rest must not write there.
UML_TMPFS = ("/run", "/tmp", "/var/tmp", "/var/log", "/var/cache", "/dev/shm")
UML_NOTE = (
    "user-mode Linux requested: the kernel runs on the real CPU as host processes (one CPU, system calls trapped)"
)


class VmUnavailable(RuntimeError):
    """The VM cannot be started here: a tool or a kernel is missing (the message says which)."""


class VmBootFailed(RuntimeError):
    """QEMU ran but the guest never reached the command, or died before it finished."""


@dataclass
class VmRun:
    """One command in the VM: its exit status, how the guest was accelerated, and its output."""

    rc: int
    accel: str  # "kvm", "tcg" or "uml"
    kernel: str
    cpus: int
    memory: str
    wall_s: float
    boot_s: float | None  # until the guest printed BOOTED
    kvm_note: str  # why KVM was or was not used (UML: that it was asked for)
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


def find_uml(explicit: str | None = None) -> tuple[Path, str]:
    """(linux.uml, release) of Debian's user-mode Linux whose module tree has sch_netem:
    ``explicit`` (or $UDTBED_UML) if given, else /usr/bin/linux.uml."""
    binary = Path(explicit or os.environ.get("UDTBED_UML") or UML_BINARY)
    install = "`apt-get install user-mode-linux` (Debian's 6.1um kernel, its modules under /usr/lib/uml/modules)"
    if not binary.is_file():
        raise VmUnavailable(f"user-mode Linux is not installed ({binary} does not exist): {install}")
    try:
        p = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise VmUnavailable(f"{binary} does not run ({err}): {install}") from err
    release = p.stdout.strip().split()[-1] if p.stdout.strip() else ""
    mods = UML_MODULES / release
    if not release or not any((mods / "kernel/net/sched").glob("sch_netem.ko*")):
        raise VmUnavailable(f"{binary} (release {release or '?'}) has no sch_netem module under {mods}: {install}")
    return binary, release


def _guest_script(command: list[str], cwd: Path, env: dict[str, str], prelude: str = "") -> str:
    """The shell line the guest runs: BOOTED, ``prelude`` (its output is the command's), the
    command in ``cwd`` with ``env``, EXIT and its status."""
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
    prelude = f"{prelude}; " if prelude else ""
    return f"echo {BOOTED}; {prelude}cd {shlex.quote(str(cwd))} && env {exports} {shlex.join(command)}; echo {EXIT}$?"


def uml_init_script(
    command: list[str], cwd: Path, env: dict[str, str], rw: list[Path], release: str, modules: Path = UML_MODULES
) -> str:
    """PID 1 of a UML guest whose root is the host's ``/``, read-only: the kernel's filesystems,
    tmpfs over :data:`UML_TMPFS`, each ``rw`` directory writable (a hostfs mount of the host's
    directory over the guest's view of it), the UML module tree as ``/lib/modules``, the netem
    backend's modules loaded; then the command (:func:`_guest_script`) and power-off."""
    q = shlex.quote
    lines = [
        "#!/bin/sh",
        "# PID 1 of a `udtbed vm --accel uml` guest (testbed/udtbed/emulation/vm.py). Its root is the host's /,",
        "# read-only: only the tmpfs and the rw mounts below can be written.",
        "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root",
        "mount -t proc -o nosuid,nodev,noexec proc /proc",
        "mount -t sysfs -o nosuid,nodev,noexec sysfs /sys",
        "grep -q ' /dev ' /proc/mounts || mount -t devtmpfs -o mode=0755 devtmpfs /dev",
        "mkdir -p /dev/pts /dev/shm && mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts",
    ]
    for t in UML_TMPFS:
        mode = "1777" if t in ("/tmp", "/var/tmp", "/dev/shm") else "0755"
        lines.append(f"[ -d {t} ] && ! [ -L {t} ] && mount -t tmpfs -o mode={mode},nosuid,nodev tmpfs {t}")
    tree = q(str(modules / release))
    lines.append(f"mount -t tmpfs -o mode=0755 modules /lib/modules && ln -s {tree} /lib/modules/{q(release)}")
    for d in uml_hidden_by_tmpfs(cwd):
        # The command's directory under one of those tmpfs (a checkout in /tmp): the host's tree
        # there, read-only as the rest of the root.
        host = q(str(d))
        lines.append(f"mkdir -p {host} && mount -r -t hostfs -o {host} hostfs {host}")
    for d in rw:
        # hostfs takes the host's path as its mount data: a comma would end it (refused in run()).
        host = q(str(d))
        lines.append(f"mkdir -p {host} && mount -t hostfs -o {host} hostfs {host}")
    load = f"modprobe -a {' '.join(UML_GUEST_MODULES)} || echo 'udtbed vm: modprobe could not load every module' >&2"
    lines.append(_guest_script(command, cwd, env, prelude=load))
    # Power-off through sysrq: needs no tool, and init never returns (its exit would panic the kernel).
    lines += ["echo o > /proc/sysrq-trigger", "sleep 60"]
    return "\n".join(lines) + "\n"


def uml_hidden_by_tmpfs(path: Path) -> list[Path]:
    """The directory a UML guest must mount from the host for ``path`` to be seen there: where
    ``path`` lies under one of :data:`UML_TMPFS`, that tmpfs's entry that holds it
    (``/tmp/clone/testbed`` -> ``/tmp/clone``, so that ``../.venv`` is there too); else none."""
    for t in map(Path, UML_TMPFS):
        if path != t and path.is_relative_to(t):
            return [t / path.relative_to(t).parts[0]]
    return []


def uml_mem(memory: str) -> str:
    """QEMU's memory size (``4G``, ``512M``, MiB when bare) as UML's ``mem=`` takes it (k/K/m/M)."""
    m = re.fullmatch(r"(\d+)([KMGkmg]?)", memory.strip())
    if not m:
        raise ValueError(f"memory {memory!r}: want a size such as 4G or 512M")
    n, unit = int(m[1]), m[2].upper() or "M"
    return f"{n * 1024}M" if unit == "G" else f"{n}{unit}"


def uml_command(binary: Path, init: Path, memory: str, uml_dir: Path, umid: str) -> list[str]:
    """The host's command line of a UML guest that runs ``init`` as PID 1 on a read-only hostfs
    root, its console on stdout (no input), its pid file and console socket in ``uml_dir``."""
    return [
        str(binary),
        f"mem={uml_mem(memory)}",
        "root=/dev/root",
        "rootfstype=hostfs",
        "rootflags=/",
        "ro",
        f"init={init}",
        f"uml_dir={uml_dir}",
        f"umid={umid}",
        "con=null",
        "con0=null,fd:1",
        "ssl=null",
        "noreboot",
        "quiet",
    ]


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
    return _watch(cmd, env, timeout_s, echo)


def _watch(cmd: list[str], env: dict[str, str], timeout_s: float, echo: bool) -> tuple[int, str, float, float | None]:
    """Runs the guest's host command: (its exit status, output, wall seconds, seconds until BOOTED
    or None); echoes the command's output as it comes."""
    env = env | {processes.MARK_VAR: processes.RUN_ID}  # as every process of a run: a cleanup's sweep finds it
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
    finished = False  # past EXIT: the guest's shutdown (UML prints its power-off), not the command's
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
                    finished = finished or EXIT in line
                    if echo and booted is not None and BOOTED not in line and not finished:
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
    """QEMU and every helper of vng's session (or UML and its processes): SIGTERM, then SIGKILL
    (the harness's stop)."""
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
    ``accel="uml"``: in Debian's user-mode Linux instead (``kernel``: its binary), on one CPU.

    Raises VmUnavailable (missing tools or kernel), VmBootFailed (the guest never reached the
    command or died in it: the message names the acceleration and QEMU's last words) and
    TimeoutExpired (the VM is stopped first)."""
    if accel not in ACCELS:
        raise ValueError(f"accel {accel!r}: want auto, kvm, tcg or uml")
    guest_env = {k: v for k, v in os.environ.items() if PASS_ENV.match(k)} | (env or {})
    if accel == "uml":
        return _run_uml(command, memory, list(rw or []), cwd or Path.cwd(), guest_env, timeout_s, kernel, echo)
    check_tools()
    vmlinuz, release = find_kernel(kernel)
    vng_path()
    if accel == "tcg":
        use_kvm, note = False, "TCG requested"
    else:
        use_kvm, note = kvm_usable(vmlinuz, cpus, memory)
        if not use_kvm and accel == "kvm":
            raise VmBootFailed(f"KVM requested but {note}; use accel tcg (--accel tcg)")
    script = _guest_script(command, cwd or Path.cwd(), guest_env)
    rc, out, wall, booted = _boot(
        vmlinuz, script, kvm=use_kvm, cpus=cpus, memory=memory, rw=list(rw or []), timeout_s=timeout_s, echo=echo
    )
    name = "kvm" if use_kvm else "tcg"
    return _result(out, rc, booted, wall, name, release, cpus, memory, note, "vng")


def _run_uml(
    command: list[str],
    memory: str,
    rw: list[Path],
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    binary: str | None,
    echo: bool,
) -> VmRun:
    uml, release = find_uml(binary)
    for d in rw:
        if "," in str(d) or not d.is_absolute():
            raise VmUnavailable(f"--rw {d}: UML's hostfs mounts only an absolute path without a comma")
    for d in uml_hidden_by_tmpfs(cwd):
        if "," in str(d):
            raise VmUnavailable(f"{d}: UML's hostfs mounts only a path without a comma; run from elsewhere")
    # The init script and UML's pid file and console socket: on the host, gone with the run. The
    # guest's tmpfs over /tmp hides them from it; the kernel has opened its init by then.
    with tempfile.TemporaryDirectory(prefix="udtbed-uml-") as tmp:
        init = Path(tmp) / "init"
        init.write_text(uml_init_script(command, cwd, env, rw, release))
        init.chmod(0o755)
        cmd = uml_command(uml, init, memory, Path(tmp), f"udtbed-{os.getpid()}")
        rc, out, wall, booted = _watch(cmd, dict(os.environ), timeout_s, echo)
    why = uml_refused_by_this_cpu(out, Path("/proc/cpuinfo")) if booted is None else None
    if why:
        raise VmUnavailable(why)
    return _result(out, rc, booted, wall, "uml", release, 1, memory, UML_NOTE, "linux.uml")


def uml_refused_by_this_cpu(out: str, cpuinfo: Path) -> str | None:
    """Why a UML guest whose output is ``out`` could not run its init on this host's CPU, or
    None. UML keeps each guest process's floating-point state through ptrace in a buffer of the
    size its 6.1 kernel knows; on a CPU whose extended state is larger (AMX's tile data, 8 KiB)
    the host refuses it (``ptrace set fp regs failed, errno = 14``) and init dies before it runs."""
    if "ptrace set fp regs failed" not in out:
        return None
    try:
        amx = " amx_tile" in cpuinfo.read_text()
    except OSError:
        amx = False
    cpu = "this CPU has AMX (amx_tile), whose" if amx else "this CPU's"
    return (
        "user-mode Linux cannot run a process on this host: it could not restore a process's "
        f"floating-point registers through ptrace ('ptrace set fp regs failed'); {cpu} extended "
        "state is larger than the 6.1um kernel handles. Use --accel tcg (or kvm where it boots)."
    )


def _result(
    out: str,
    rc: int,
    booted: float | None,
    wall: float,
    name: str,
    release: str,
    cpus: int,
    memory: str,
    note: str,
    tool: str,
) -> VmRun:
    """The run's record from the guest's output, or VmBootFailed where it never reached the
    command or died in it."""
    status = _exit_status(out)
    if booted is None or status is None:
        tail = "\n".join([ln for ln in out.splitlines() if ln.strip()][-15:])
        where = "never reached the command" if booted is None else "died before the command finished"
        raise VmBootFailed(
            f"the {release} guest under {name.upper()} {where} ({tool} exit {rc}); its last output:\n{tail}"
        )
    body = out.split(BOOTED, 1)[1].split("\n", 1)[-1]
    body = body[: body.rfind(EXIT)]  # what follows is the guest's shutdown
    return VmRun(status, name, release, cpus, memory, wall, booted, note, body)
