"""The full-scale bundle (testbed/fullscale/bundle.sh) and its driver (run.sh): the runner, our
stacks, libudt and Debian's network tools from one relocatable tree on a host that has none of
them, run here with PATH and LD_LIBRARY_PATH cleared to the bundle and a bare base system, so
that a missing program or library shows up here and not on a borrowed machine. Also the
runner's options a full-scale plan uses: ``--parts``."""

import importlib.util
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
from udtbed.commands.shared import select_experiments, select_parts
from udtbed.emulation import cores
from udtbed.emulation.topology import load
from udtbed.experiments import seats
from udtbed.experiments.experiment import EXPERIMENTS_DIR, ExperimentError

REPO = Path(__file__).resolve().parents[2]
FULLSCALE = REPO / "testbed/fullscale"
# What a minimal Ubuntu or Debian host has of its own: no iproute2, ethtool, net-tools, Mininet,
# iperf3, tcpdump or Python.
BASE_PACKAGES = ["coreutils", "dash", "grep", "sed", "gawk", "mawk", "tar", "gzip", "procps", "findutils", "util-linux"]


def base_system(into: Path) -> Path:
    """A directory of links to the base packages' commands: the only PATH besides the bundle."""
    into.mkdir()
    for pkg in BASE_PACKAGES:
        p = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True)
        for line in p.stdout.splitlines():
            f = Path(line)
            if f.parent.name in ("bin", "sbin") and f.is_file() and os.access(f, os.X_OK):
                (into / f.name).unlink(missing_ok=True)
                (into / f.name).symlink_to(f)
    awk = shutil.which("awk")
    if awk and not (into / "awk").exists():
        (into / "awk").symlink_to(Path(awk).resolve())
    assert not any((into / t).exists() for t in ("ip", "tc", "ethtool", "ifconfig", "python3", "mnexec"))
    return into


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundle, built as `make fullscale-bundle` builds it, into a temporary directory."""
    out = tmp_path_factory.mktemp("bundle") / "fullscale"
    p = subprocess.run(["bash", str(FULLSCALE / "bundle.sh"), str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return out


def bare_env(base: Path, **extra: str) -> dict[str, str]:
    return {"HOME": "/root", "PATH": str(base), **extra}


def test_the_bundle_holds_every_library_its_programs_load_but_glibc(bundle: Path) -> None:
    manifest = (bundle / "MANIFEST").read_text()
    for prog in ("udt", "sabul", "frtp", "udt-linkem", "libudt-peer", "ip", "tc", "ethtool", "iperf3", "tcpdump"):
        assert f"./bin/{prog}\n" in manifest, prog
    assert "./lib/libudt.so.0\n" in manifest and "./site/mininet/node.py\n" in manifest
    assert not (bundle / "lib/libc.so.6").exists(), "glibc stays the host's"
    for path in sorted((bundle / "bin").iterdir()):
        p = subprocess.run(
            ["ldd", str(path)], capture_output=True, text=True, env={"LD_LIBRARY_PATH": str(bundle / "lib")}
        )
        assert "not found" not in p.stdout, f"{path.name}: {p.stdout}"
    with tarfile.open(f"{bundle}.tar.gz") as t:
        assert "fullscale/env.sh" in t.getnames()


@pytest.mark.needs_root
@pytest.mark.slow
def test_the_bundle_runs_the_runner_on_a_host_with_nothing_but_a_base_system(bundle: Path, tmp_path: Path) -> None:
    # The archive, unpacked by run.sh itself, and a one-line plan: chicago-local at scale 0.1,
    # udt-rs beside libudt, on every CPU this process may use.
    plan = tmp_path / "plan.txt"
    cpus = ",".join(map(str, sorted(os.sched_getaffinity(0))))
    plan.write_text(f"# a test plan\n1 {cpus} --experiments efficiency --parts chicago-local --stacks udt-rs,libudt\n")
    results = tmp_path / "results"
    env = bare_env(
        base_system(tmp_path / "base"),
        BUNDLE=f"{bundle}.tar.gz",
        RESULTS=str(results),
        SCALE="0.1",
        DURATION="4",
        DEADLINE_S="240",
    )
    p = subprocess.run(
        [str(bundle / "bin/bash"), str(FULLSCALE / "run.sh"), str(plan)],
        capture_output=True,
        text=True,
        env=env,
        timeout=400,
    )
    assert p.returncode == 0, p.stdout + p.stderr + (results / f"1-{cpus}/run.log").read_text()
    host = (results / "host.txt").read_text()
    assert "netns: yes" in host and "veth: yes" in host and "python: 3." in host, host
    (run_dir,) = [d for d in (results / f"1-{cpus}").iterdir() if d.is_dir() and not d.is_symlink()]
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "ok" and meta["scale"] == 0.1 and meta["commit"] != "unknown", meta
    eff = json.loads((run_dir / "efficiency.json").read_text())
    assert [p["label"] for p in eff["parts"]] == ["chicago-local"], "--parts ran that part alone"
    stacks = eff["parts"][0]["stacks"]
    assert set(stacks) == {"udt-rs", "libudt"}
    for name, res in stacks.items():
        assert res["flows"][0]["bytes"] > 0, f"{name} moved nothing"
    # No matplotlib in the bundle: the report is drawn from the results where there is one.
    assert "draw it from the results: python -m udtbed report" in (results / f"1-{cpus}/run.log").read_text()
    assert "exit 0" in (results / "plan.log").read_text()
    # The host's socket buffer caps are back as they were.
    before = host.split("(were ")[1].split(")")[0].split()
    now = [Path(f"/proc/sys/net/core/{k}").read_text().strip() for k in ("rmem_max", "wmem_max")]
    assert now == before


def program_needing_a_library_nobody_has(into: Path) -> Path:
    """A program linked against a library that exists only while it is linked: as a bundled
    program whose library the bundle left out would be on a host without it."""
    work = into / "cc"
    work.mkdir()
    (work / "lib.c").write_text("int udtb_gone(void) { return 0; }\n")
    (work / "main.c").write_text("int udtb_gone(void);\nint main(void) { return udtb_gone(); }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", work / "libudtbgone.so", work / "lib.c"], check=True)
    prog = into / "needs-gone"
    subprocess.run(["cc", "-o", prog, work / "main.c", f"-L{work}", "-ludtbgone"], check=True)
    shutil.rmtree(work)
    return prog


@pytest.mark.needs_root
def test_a_bundle_missing_a_library_is_refused_before_anything_is_built_naming_it(bundle: Path, tmp_path: Path) -> None:
    broken = tmp_path / "fullscale"
    shutil.copytree(bundle, broken, symlinks=True)
    shutil.move(program_needing_a_library_nobody_has(tmp_path), broken / "bin/ip")
    plan = tmp_path / "plan.txt"
    plan.write_text("1 0 --experiments efficiency\n")
    env = bare_env(base_system(tmp_path / "base"), BUNDLE=str(broken), RESULTS=str(tmp_path / "r"))
    p = subprocess.run(
        [str(bundle / "bin/bash"), str(FULLSCALE / "run.sh"), str(plan)], capture_output=True, text=True, env=env
    )
    assert p.returncode == 4, p.stdout + p.stderr
    assert "bin/ip does not start" in p.stderr and "libudtbgone.so" in p.stderr, p.stderr
    assert "make fullscale-bundle" in p.stderr and not (tmp_path / "r").exists(), "nothing started"


def udtb_namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.startswith("udtb-")}


def processes_under(path: Path) -> list[str]:
    """Command lines of the processes that run something from ``path``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(path) in argv:
            found.append(argv)
    return found


@pytest.mark.needs_root
@pytest.mark.slow
def test_ctrl_c_stops_every_lane_cleanly_and_puts_the_socket_caps_back(bundle: Path, tmp_path: Path) -> None:
    # Two lanes at once, interrupted while their parts run: each runner stops as it does alone.
    plan = tmp_path / "plan.txt"
    cpu = min(os.sched_getaffinity(0))
    args = "--experiments efficiency --parts chicago-amsterdam --stacks udt-rs --calibration flag --cores flag"
    plan.write_text(f"1 {cpu} {args}\n1 {cpu}-{cpu} {args}\n")
    copy = tmp_path / "unpacked"
    shutil.copytree(bundle, copy, symlinks=True)
    results = tmp_path / "results"
    caps = [Path(f"/proc/sys/net/core/{k}").read_text().strip() for k in ("rmem_max", "wmem_max")]
    before = udtb_namespaces()
    env = bare_env(base_system(tmp_path / "base"), BUNDLE=str(copy), RESULTS=str(results), SCALE="0.1", DURATION="60")
    run = subprocess.Popen(
        [str(bundle / "bin/bash"), str(FULLSCALE / "run.sh"), str(plan)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        # Ctrl-C as a terminal sends it, also where this pytest was started with SIGINT ignored
        # (a background job of a non-interactive shell): an ignored SIGINT survives exec.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any("-l0" in ns for ns in udtb_namespaces() - before):
            time.sleep(0.5)
        assert udtb_namespaces() - before, "the runs built their namespaces"
        time.sleep(3)
        run.send_signal(signal.SIGINT)
        out, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, out
    assert "interrupted: stopping the runs" in out
    assert not udtb_namespaces() - before, "no namespace left behind"
    assert not processes_under(copy), "no process of the bundle left behind"
    assert [Path(f"/proc/sys/net/core/{k}").read_text().strip() for k in ("rmem_max", "wmem_max")] == caps
    for lane in (f"1-{cpu}", f"1-{cpu}-{cpu}"):
        meta = json.loads(next((results / lane).glob("2*/run.json")).read_text())
        assert meta["status"] == "interrupted", (lane, meta["status"])


@pytest.mark.parametrize(
    ("setup", "want"),
    [
        ("no-plan", "no plan file"),
        ("no-bundle", "is no bundle (no env.sh): make fullscale-bundle"),
    ],
)
def test_run_sh_says_what_is_missing(tmp_path: Path, setup: str, want: str) -> None:
    plan = tmp_path / "plan.txt"
    if setup != "no-plan":
        plan.write_text("1 0 --experiments efficiency\n")
    env = {**os.environ, "BUNDLE": str(tmp_path), "RESULTS": str(tmp_path / "r")}
    p = subprocess.run(["bash", str(FULLSCALE / "run.sh"), str(plan)], capture_output=True, text=True, env=env)
    assert p.returncode == 2 and want in p.stderr, p.stderr


def test_run_sh_refuses_a_plan_naming_a_file_the_bundle_lacks(tmp_path: Path) -> None:
    # A plan's UDT_BIN=$UDTB_BUNDLE/bin/udt-base (an A/B against an earlier build) needs a bundle
    # built with BASE=<ref>: said before anything runs, not as a skipped stack on a borrowed host.
    bundle = tmp_path / "bundle"
    (bundle / "bin").mkdir(parents=True)
    (bundle / "env.sh").write_text(f"UDTB_BUNDLE={bundle}\nexport UDTB_BUNDLE\n")
    plan = tmp_path / "plan.txt"
    plan.write_text("# a comment\n1 0-3 UDT_BIN=$UDTB_BUNDLE/bin/udt-base --experiments efficiency\n")
    env = {**os.environ, "BUNDLE": str(bundle), "RESULTS": str(tmp_path / "r")}
    p = subprocess.run(["bash", str(FULLSCALE / "run.sh"), str(plan)], capture_output=True, text=True, env=env)
    assert p.returncode == 2, p.stderr
    assert f"names {bundle}/bin/udt-base, which this bundle lacks" in p.stderr and "BASE=<ref>" in p.stderr


@pytest.mark.parametrize("plan", sorted(p.name for p in FULLSCALE.glob("plan-*.txt")))
def test_each_line_of_a_shipped_plan_fits_its_cpus_at_full_scale_unless_flagged(plan: str) -> None:
    # One core per seat (udtbed.emulation.cores) for every part a line runs, on that line's CPUs; a line
    # that breaks the rule on purpose says --cores flag.
    lines = [x.split() for x in (FULLSCALE / plan).read_text().splitlines() if x.strip() and not x.startswith("#")]
    assert lines
    for _, cpus, *words in lines:
        args = [w for w in words if w.startswith("--") or not re.match(r"[A-Z_][A-Z0-9_]*=", w)]
        opt = dict(zip(args[::2], args[1::2], strict=True))
        have = len(cores.parse_cpus(cpus))
        where = REPO / opt["--experiments-dir"] if "--experiments-dir" in opt else EXPERIMENTS_DIR
        for e in select_parts(select_experiments(where, opt["--experiments"]), opt.get("--parts")):
            for part in e.parts:
                need = seats.plan(part, load(part.topology), "linkem").need
                assert need <= have or opt.get("--cores") == "flag", (plan, cpus, part.label, need)


def test_parts_picks_labels_across_the_experiments_chosen_and_refuses_an_unknown_one() -> None:
    exps = select_experiments(EXPERIMENTS_DIR, "efficiency,fairness")
    picked = select_parts(exps, "chicago-amsterdam,three-site")
    assert [(e.name, [p.label for p in e.parts]) for e in picked] == [
        ("efficiency", ["chicago-amsterdam"]),
        ("fairness", ["three-site"]),
    ]
    assert [e.name for e in select_parts(exps, "chicago-local")] == ["efficiency"], "an emptied experiment is dropped"
    assert select_parts(exps, None) == exps
    with pytest.raises(
        ExperimentError, match=r"unknown part 'chicago-mars' \(the experiments chosen have .*three-site"
    ):
        select_parts(exps, "chicago-mars")


def test_an_unknown_part_is_a_usage_error_before_anything_runs(tmp_path: Path) -> None:
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "udtbed",
            "run",
            "--experiments",
            "efficiency",
            "--parts",
            "nowhere",
            "--results",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and "unknown part 'nowhere'" in p.stderr, p.stderr
    assert not list(tmp_path.iterdir())


def _udp_frame(src: int, payload: bytes) -> bytes:
    ip = struct.pack("!BBHHHBBHII", 0x45, 0, 28 + len(payload), 0, 0, 64, 17, 0, src, 0x0A000002)
    return b"\0" * 12 + b"\x08\x00" + ip + struct.pack("!HHHH", 9000, 9000, 8 + len(payload), 0) + payload


def _pcap(path: Path, frames: list[tuple[float, bytes]]) -> None:
    out = bytearray(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 96, 1))
    for t, frame in frames:
        cut = frame[:96]
        out += struct.pack("<IIII", int(t), round((t - int(t)) * 1e9), len(cut), len(frame)) + cut
    path.write_bytes(bytes(out))


def test_epochs_reads_losses_runs_and_naks_from_captures_at_both_ends(tmp_path: Path) -> None:
    """testbed/fullscale/epochs.py on a pair of captures with known losses: packets 500-501 and
    700 lost in one epoch (two runs, one NAK each), 2000 in a second one 2.4 s later; the receiver's
    first arrival 150 ms after the send, plus the queue."""
    epochs = _load_script(FULLSCALE / "epochs.py")
    base, lost = 2**31 - 1000, {500, 501, 700, 2000}  # the sequence numbers wrap at 2^31
    sent, recv = [], []
    for i in range(3000):
        t = 1.0 + i * 0.0012
        data = _udp_frame(0x0A000001, struct.pack("!IIII", (base + i) % 2**31, 0, 0, 7) + b"x" * 1440)
        sent.append((t, data))
        if i not in lost:
            recv.append((t + 0.150 + (0.002 if i > 400 else 0.0), data))
    nak = struct.pack("!IIII", 0x80030000, 0, 0, 7)
    recv += [
        (
            1.0 + 502 * 0.0012 + 0.152,
            _udp_frame(0x0A000002, nak + struct.pack("!II", 0x80000000 | (base + 500) % 2**31, (base + 501) % 2**31)),
        )
    ]
    recv += [(1.0 + 701 * 0.0012 + 0.152, _udp_frame(0x0A000002, nak + struct.pack("!I", (base + 700) % 2**31)))]
    recv += [(1.0 + 2001 * 0.0012 + 0.152, _udp_frame(0x0A000002, nak + struct.pack("!I", (base + 2000) % 2**31)))]
    run = tmp_path / "r" / "raw"
    run.mkdir(parents=True)
    _pcap(run / "udt-rs-bulk-chicago-data.pcap", sent)
    _pcap(run / "udt-rs-bulk-amsterdam-data.pcap", sorted(recv))
    out = tmp_path / "epochs.json"
    slices = tmp_path / "slices"
    assert epochs.main([str(tmp_path / "r"), str(out), "--slices", str(slices)]) == 0
    (res,) = json.loads(out.read_text())["runs"]
    assert (res["sent"], res["received"], res["lost_first_time"], res["naks_sent"]) == (3000, 2996, 4, 3)
    assert res["base_owd_ms"] == pytest.approx(150.0, abs=0.01)
    first, second = res["epochs"]
    assert (first["lost"], first["runs"], first["naks_sent"], first["nak_words_sent"]) == (3, 2, 2, 3)
    assert first["run_lengths"] == {"1": 1, "2": 1} and first["naks_per_lost"] == pytest.approx(2 / 3, abs=1e-3)
    assert first["first_lost_sent_s"] == pytest.approx(500 * 0.0012, abs=1e-6)
    assert (second["lost"], second["runs"]) == (1, 1)
    assert max(q for q in second["queue_ms_before"] if q is not None) == pytest.approx(2.0, abs=0.01)
    # Each end's slice is around its own moment of the second epoch: the packet after the lost one
    # is in both, the receiver's a one-way delay later.
    for end in ("send", "recv"):
        (cut,) = slices.glob(f"*udt-rs-{end}.pcap")
        seqs = {struct.unpack_from("!I", f[3])[0] for f in epochs.frames(cut)}
        assert (base + 2001) % 2**31 in seqs, end


def _load_script(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
