"""``udtbed vm``: a command in Debian's stock kernel under QEMU, its exit status and output back,
a clear refusal when a piece is missing, and nothing left running when it is stopped."""

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import interruptible
from udtbed import vm

REPO = Path(__file__).resolve().parents[2]


def have_vm() -> str | None:
    """Why the VM cannot start here, or None."""
    try:
        vm.check_tools()
        vm.find_kernel()
        vm.vng_path()
    except vm.VmUnavailable as err:
        return str(err)
    return None


needs_vm = pytest.mark.skipif(have_vm() is not None, reason=f"no VM here: {have_vm()}")


def udtbed_vm(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "udtbed", "vm", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        preexec_fn=interruptible,
    )


def qemu_with(marker: str) -> list[int]:
    """PIDs of QEMU processes whose command line carries ``marker`` (read from /proc; nothing is killed)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmd and b"qemu-system" in cmd[0] and marker.encode() in b" ".join(cmd):
                out.append(int(d.name))
    return out


@needs_vm
@pytest.mark.slow
def test_a_command_runs_in_the_stock_kernel_and_its_exit_status_comes_back(tmp_path: Path) -> None:
    """One boot: the guest runs the stock kernel with netem, writes into a shared directory, and
    its exit status (3) is udtbed vm's; the record says how it was accelerated and why."""
    record = tmp_path / "vm.json"
    script = "uname -r; modprobe sch_netem && echo netem-loaded; echo out > $0/written; exit 3"
    p = udtbed_vm("--rw", str(tmp_path), "--record", str(record), "--", "sh", "-c", script, str(tmp_path))
    assert p.returncode == 3, p.stdout + p.stderr
    _, release = vm.find_kernel()
    assert release in p.stdout and "netem-loaded" in p.stdout, p.stdout
    assert (tmp_path / "written").read_text() == "out\n"
    r = json.loads(record.read_text())
    assert r["rc"] == 3 and r["kernel"] == release and r["accel"] in ("kvm", "tcg")
    assert r["kvm_note"], r
    assert f"under {r['accel'].upper()}" in p.stderr


def test_a_missing_kernel_is_refused_with_what_to_do(tmp_path: Path) -> None:
    p = udtbed_vm("--kernel", str(tmp_path / "vmlinuz-none"), "--", "true", timeout=60)
    assert p.returncode == 3, p.stderr
    assert "make setup" in p.stderr and "vmlinuz-none does not exist" in p.stderr


def test_no_command_is_a_usage_error() -> None:
    p = udtbed_vm("--", timeout=60)
    assert p.returncode == 2 and "no command" in p.stderr


@needs_vm
def test_a_kernel_that_does_not_boot_says_so_and_names_the_acceleration(tmp_path: Path) -> None:
    """A file that is no kernel, under a release that has modules: QEMU starts and the guest never
    reaches the command."""
    _, release = vm.find_kernel()
    bogus = tmp_path / f"vmlinuz-{release}"
    bogus.write_bytes(b"\0" * 4096)
    p = udtbed_vm("--accel", "tcg", "--kernel", str(bogus), "--timeout", "120", "--", "true", timeout=180)
    assert p.returncode == 4, p.stdout + p.stderr
    assert "under TCG never reached the command" in p.stderr, p.stderr


@needs_vm
@pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="needs QEMU")
def test_a_vm_past_its_timeout_is_stopped_with_qemu(tmp_path: Path) -> None:
    memory = "3001M"  # marks this test's QEMU among any others
    p = udtbed_vm("--accel", "tcg", "--memory", memory, "--timeout", "8", "--", "sleep", "600", timeout=120)
    assert p.returncode == 124, p.stderr
    assert "past --timeout" in p.stderr
    deadline = time.monotonic() + 10
    while qemu_with(memory) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not qemu_with(memory)


CPUINFO_NO_VT = "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep sse sse2 avx\n"
CPUINFO_VMX = "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr vmx sse sse2 avx\n"


def test_kvm_on_a_cpu_without_hardware_virtualisation_is_not_probed() -> None:
    # Our machines: a Firecracker guest whose /dev/kvm is kvm_pvm; probing it cost 60 s of a
    # hung boot every run (docs/results/2026-11-28-kvm-pvm.md).
    why = vm.kvm_without_hardware(CPUINFO_NO_VT, {"kvm", "kvm_pvm", "veth"})
    assert why is not None and "kvm_pvm" in why and "software" in why
    assert "no vmx/svm" in (vm.kvm_without_hardware(CPUINFO_NO_VT, {"kvm"}) or "")
    assert vm.kvm_without_hardware(CPUINFO_VMX, {"kvm", "kvm_intel"}) is None
    assert vm.kvm_without_hardware(CPUINFO_VMX.replace("vmx", "svm"), {"kvm", "kvm_amd"}) is None
