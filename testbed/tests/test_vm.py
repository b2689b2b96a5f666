"""``udtbed vm``: a command in Debian's stock kernel under QEMU, its exit status and output back,
a clear refusal when a piece is missing, and nothing left running when it is stopped."""

import functools
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import interruptible
from udtbed.emulation import vm

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


def guests_with(program: str, marker: str) -> list[int]:
    """PIDs of the processes of ``program`` (QEMU's ``qemu-system``, UML's ``linux.uml``) whose
    command line carries ``marker`` (read from /proc; nothing is killed)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmd and program.encode() in cmd[0] and marker.encode() in b" ".join(cmd):
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
    while guests_with("qemu-system", memory) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not guests_with("qemu-system", memory)


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


# User-mode Linux (--accel uml): Debian's 6.1um kernel as a host program, on the real CPU.


@functools.cache
def have_uml() -> str | None:
    """Why UML cannot start here, or None: not installed, or (one ~3-s boot) this host's CPU
    refuses its processes (`vm.uml_refused_by_this_cpu`). Any other failure of that boot is
    left to the tests to report."""
    try:
        vm.find_uml()
        vm.run(["true"], accel="uml", cwd=Path("/"), timeout_s=120)
    except vm.VmUnavailable as err:
        return str(err)
    except (vm.VmBootFailed, subprocess.TimeoutExpired):
        return None
    return None


@pytest.fixture
def uml_here() -> None:
    """Skips a test that boots UML where it cannot run (asked only when such a test runs)."""
    why = have_uml()
    if why is not None:
        pytest.skip(f"no UML here: {why}")


needs_uml = pytest.mark.usefixtures("uml_here")


def test_uml_missing_says_which_package_to_install(tmp_path: Path) -> None:
    p = udtbed_vm("--accel", "uml", "--kernel", str(tmp_path / "linux.uml"), "--", "true", timeout=60)
    assert p.returncode == 3, p.stderr
    assert "apt-get install user-mode-linux" in p.stderr and "linux.uml does not exist" in p.stderr


def test_a_uml_kernel_without_netem_modules_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "linux.uml"
    fake.write_text("#!/bin/sh\necho 0.0.0-none\n")
    fake.chmod(0o755)
    with pytest.raises(vm.VmUnavailable, match=r"release 0\.0\.0-none\) has no sch_netem module.*apt-get install"):
        vm.find_uml(str(fake))


def test_the_uml_guest_boots_read_only_from_the_hosts_root() -> None:
    cmd = vm.uml_command(Path("/usr/bin/linux.uml"), Path("/tmp/x/init"), "4G", Path("/tmp/x"), "udtbed-1")
    assert cmd[0] == "/usr/bin/linux.uml"
    assert {"rootfstype=hostfs", "rootflags=/", "ro", "init=/tmp/x/init", "mem=4096M", "uml_dir=/tmp/x"} <= set(cmd)
    assert "rw" not in cmd and "con0=null,fd:1" in cmd  # no input; the console is our stdout


def test_a_cpu_that_refuses_umls_processes_is_named_with_what_to_do(tmp_path: Path) -> None:
    # Seen on a host with AMX (6.18 host kernel, Debian's 6.1.176um): init dies before it runs.
    out = "Run /tmp/udtbed-uml-x/init as init process\nuserspace - ptrace set fp regs failed, errno = 14\n"
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("flags\t\t: fpu avx512f amx_bf16 amx_tile amx_int8\n")
    why = vm.uml_refused_by_this_cpu(out, cpuinfo)
    assert why is not None and "amx_tile" in why and "--accel tcg" in why
    cpuinfo.write_text("flags\t\t: fpu avx2\n")
    assert "AMX" not in (vm.uml_refused_by_this_cpu(out, cpuinfo) or "")
    assert vm.uml_refused_by_this_cpu("Kernel panic - not syncing: VFS: Unable to mount root fs", cpuinfo) is None


def test_memory_sizes_are_given_to_uml_in_its_units() -> None:
    assert [vm.uml_mem(m) for m in ("4G", "512M", "1024", "64k")] == ["4096M", "512M", "1024M", "64K"]
    with pytest.raises(ValueError):
        vm.uml_mem("4 gigs")


def test_the_uml_init_writes_only_to_tmpfs_and_the_rw_directories() -> None:
    """Everything a run writes outside its rw directories (/run/netns, pytest's /tmp) lands in
    the guest's tmpfs; the rw directories are hostfs mounts; all of it before the command."""
    rw = [Path("/work/main/build/vm"), Path("/tmp/pytest-of-root/x")]
    env = {"UDT_X": "a b"}
    text = vm.uml_init_script(["pytest", "-q"], Path("/work/main/testbed"), env, rw, "6.1.176")
    lines = text.splitlines()
    assert lines[0] == "#!/bin/sh"
    command = next(i for i, ln in enumerate(lines) if vm.BOOTED in ln)
    setup = "\n".join(lines[:command])
    for t in ("/run", "/tmp", "/var/tmp", "/dev/shm"):
        assert f" tmpfs {t}\n" in setup + "\n", t
    for d in rw:
        assert f"mkdir -p {d} && mount -t hostfs -o {d} hostfs {d}" in setup
    # /tmp's tmpfs first, so that an rw directory under /tmp is the host's, not the tmpfs's.
    assert setup.index(" tmpfs /tmp") < setup.index("hostfs /tmp/pytest-of-root/x")
    assert "ln -s /usr/lib/uml/modules/6.1.176 /lib/modules/6.1.176" in setup
    assert "remount" not in text  # the root stays read-only (uml_command mounts it so)
    run = lines[command]
    assert "modprobe -a sch_netem sch_tbf veth bridge ipv6" in run
    assert run.index(vm.BOOTED) < run.index("modprobe") < run.index("pytest -q") < run.index(vm.EXIT)
    assert "UDT_X='a b'" in run and "cd /work/main/testbed" in run
    assert lines[command + 1 :] == ["echo o > /proc/sysrq-trigger", "sleep 60"]


def test_a_checkout_under_tmp_is_seen_by_the_uml_guest_read_only() -> None:
    """A command run from a clone in /tmp (as CI's is): the guest's tmpfs over /tmp would hide
    it, so the clone's directory is mounted from the host, read-only, after the tmpfs and before
    the rw directories in it; a checkout elsewhere needs no mount."""
    rw = [Path("/tmp/clone/build/vm")]
    text = vm.uml_init_script(["sh"], Path("/tmp/clone/testbed"), {}, rw, "6.1.176")
    mount = "mkdir -p /tmp/clone && mount -r -t hostfs -o /tmp/clone hostfs /tmp/clone"
    assert mount in text
    assert text.index(" tmpfs /tmp") < text.index(mount) < text.index("hostfs /tmp/clone/build/vm")
    assert vm.uml_hidden_by_tmpfs(Path("/work/main/testbed")) == []
    assert vm.uml_hidden_by_tmpfs(Path("/var/tmp/x/y")) == [Path("/var/tmp/x")]
    assert vm.uml_hidden_by_tmpfs(Path("/tmp")) == []
    assert "mount -r" not in vm.uml_init_script(["sh"], Path("/work/main/testbed"), {}, rw, "6.1.176")


@needs_uml
def test_a_command_runs_in_uml_with_its_exit_status_and_nothing_written_to_the_host(tmp_path: Path) -> None:
    """One UML boot (~3 s): netem and namespaces there, the rw directory written, the root
    read-only, and the guest's /run its own (its namespace never appears in the host's)."""
    record = tmp_path / "vm.json"
    name = f"udtbed-uml-test-{tmp_path.name}"
    script = (
        "uname -r; modprobe sch_netem && echo netem-loaded; ip netns add $1 && ls /run/netns;"
        " touch /etc/udtbed-uml-test || echo root-read-only; echo out > $0/written; exit 3"
    )
    p = udtbed_vm(
        "--accel", "uml", "--rw", str(tmp_path), "--record", str(record), "--", "sh", "-c", script, str(tmp_path), name
    )
    assert p.returncode == 3, p.stdout + p.stderr
    _, release = vm.find_uml()
    assert p.stdout.split()[:2] == [release, "netem-loaded"], p.stdout
    assert name in p.stdout and "root-read-only" in p.stdout and "Power" not in p.stdout, p.stdout
    assert (tmp_path / "written").read_text() == "out\n"
    assert not Path("/etc/udtbed-uml-test").exists() and not (Path("/run/netns") / name).exists()
    r = json.loads(record.read_text())
    assert r["rc"] == 3 and r["accel"] == "uml" and r["kernel"] == release and r["cpus"] == 1
    assert "under UML" in p.stderr


@needs_uml
def test_a_uml_guest_past_its_timeout_is_stopped_with_all_its_processes() -> None:
    memory = "3001M"  # mem=3001M marks this test's UML among any others
    p = udtbed_vm("--accel", "uml", "--memory", memory, "--timeout", "6", "--", "sleep", "600", timeout=120)
    assert p.returncode == 124, p.stderr
    deadline = time.monotonic() + 10
    while guests_with("linux.uml", f"mem={memory}") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not guests_with("linux.uml", f"mem={memory}")
