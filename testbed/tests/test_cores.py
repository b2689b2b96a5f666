"""Cores at full scale (udtbed.experiments.seats, udtbed.emulation.cores): each part's seats, the
refusal of a run whose parts do not fit the machine, and processes confined to the CPUs of their
seat."""

import os
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest
from conftest import udtbed_run_argv
from test_stacks import FakeNet, FakeRuntime, FakeStack, fake_net, fake_runtime
from udtbed.emulation import cores, network
from udtbed.emulation.topology import load
from udtbed.experiments import seats
from udtbed.experiments.experiment import EXPERIMENTS_DIR, Flow, Part, load_all
from udtbed.experiments.flows import start_bulk
from udtbed.results.report import parts
from udtharness import netns

EXPS = load_all(EXPERIMENTS_DIR)
TESTBED = Path(__file__).resolve().parents[1]
ONE_CPU = str(min(os.sched_getaffinity(0)))  # a run limited to one CPU this process may use


def part(exp: str, label: str) -> Part:
    (p,) = [p for p in EXPS[exp].parts if p.label == label]
    return p


def plan_of(exp: str, label: str, backend: str = "linkem") -> cores.CorePlan:
    p = part(exp, label)
    return seats.plan(p, load(p.topology), backend)


def test_a_one_flow_path_needs_its_emulated_data_direction_sender_receiver_and_runner() -> None:
    p = plan_of("efficiency", "chicago-amsterdam")
    assert [s.key for s in p.seats] == [
        ("link", "0"),
        ("flow", "amsterdam", "sender"),
        ("flow", "amsterdam", "receiver"),
        ("runner",),
    ]
    assert p.need == 4
    assert "chicago->" in p.seats[0].what  # the data direction; the ACK direction shares the runner's


def test_three_site_needs_a_core_per_emulated_link_its_data_crosses_but_none_for_the_plain_lan_link() -> None:
    p = plan_of("fairness", "three-site")
    links = [s for s in p.seats if s.key[0] == "link"]
    # the shared uplink and the Ottawa and Amsterdam links; starlight-local is a plain veth
    assert len(links) == 3 and all(s.cores == 1 for s in links)
    assert p.need == 3 + 3 * 2 + 1
    assert p.summary() == "udt-linkem 3, 3 flows × (sender, receiver) 6, runner 1"


def test_the_netem_backend_needs_no_emulator_cores_and_short_tcp_counts_its_driver_and_sink() -> None:
    assert plan_of("fairness", "three-site", "netem").need == 3 * 2 + 1
    p = plan_of("friendliness", "chicago-amsterdam")
    short = part("friendliness", "chicago-amsterdam").short_tcp
    assert short is not None
    n = max(short.bulk_flows)
    assert p.need == 1 + 2 * n + 2 + 1
    assert {s.key for s in p.seats} >= {("short", "driver"), ("short", "sink")}


def test_seats_get_disjoint_cpus_in_order_and_the_runner_keeps_the_rest() -> None:
    p = plan_of("fairness", "three-site")
    pins = cores.assign(p, list(range(2, 16)))
    sets = list(pins.seats.values())
    assert all(len(s) == 1 for s in sets) and len(set().union(*sets)) == len(sets) == 9
    assert pins.of("link", "0") == frozenset({2})  # the emulator first
    assert pins.rest == frozenset(range(11, 16))
    assert pins.as_json()["runner"] == "11-15"
    with pytest.raises(cores.CoresError, match=r"three-site needs 10 cores .* the run has 9"):
        cores.assign(p, list(range(9)))


def test_the_plan_is_enforced_from_half_scale_and_pinning_follows_it_unless_asked() -> None:
    p = plan_of("efficiency", "chicago-amsterdam")
    quick = cores.check(p, [0, 1], 0.1, "auto")
    assert (quick.checked, quick.ok, quick.pins) == (False, True, None)
    full = cores.check(p, [0, 1], 1.0, "auto")
    assert (full.checked, full.ok, full.pins) == (True, False, None)
    assert "needs 4 cores at scale 1" in full.shortfall() and "the run has 2" in full.shortfall()
    big = cores.check(p, list(range(16)), 1.0, "auto")
    assert big.ok and big.pins is not None and cast(dict[str, str], big.as_json()["pinned"])["runner"] == "3-15"
    assert cores.check(p, list(range(16)), 1.0, "off").pins is None
    parts = [(EXPS["efficiency"], part("efficiency", "chicago-amsterdam"))]
    line = cores.run_line(seats.checks(parts, "linkem", list(range(16)), 1.0, "auto"), list(range(16)))
    assert line == (
        "cores: the largest part needs 4 (efficiency / chicago-amsterdam); "
        "the run has 16 (CPUs 0-15); pinned, a CPU per seat"
    )
    assert cores.run_line(seats.checks(parts, "linkem", [0, 1], 0.1, "auto"), [0, 1]).endswith(
        "not checked below scale 0.5"
    )
    forced = cores.check(p, list(range(16)), 0.1, "on")
    assert forced.checked and forced.pins is not None


@pytest.mark.parametrize(
    ("text", "cpus"), [("0", [0]), ("0-3,8", [0, 1, 2, 3, 8]), ("3,1-2", [1, 2, 3]), (" 5 , 7 ", [5, 7])]
)
def test_cpu_lists_parse_and_print_like_taskset(text: str, cpus: list[int]) -> None:
    assert cores.parse_cpus(text) == cpus
    assert cores.parse_cpus(cores.cpu_list(cpus)) == cpus


@pytest.mark.parametrize("bad", ["", "a", "3-1", "1-", "-2", "1,,2"])
def test_a_bad_cpu_list_says_what_the_format_is(bad: str) -> None:
    with pytest.raises(cores.CoresError, match="not a CPU number or a range"):
        cores.parse_cpus(bad)


def test_a_cpu_set_outside_the_processs_affinity_is_refused() -> None:
    with pytest.raises(cores.CoresError, match="which this process may not use"):
        cores.run_cpus("4095")
    assert cores.run_cpus(None) == sorted(os.sched_getaffinity(0))


def test_a_full_scale_run_on_too_few_cores_is_refused_before_anything_is_built(tmp_path: Path) -> None:
    before = netns.list_namespaces(network.PREFIX)
    argv = udtbed_run_argv(tmp_path / "res", "--experiments", "efficiency", "--stacks", "udt-rs", "--scale", "1")
    p = subprocess.run([*argv, "--cpuset", ONE_CPU], cwd=TESTBED, capture_output=True, text=True, timeout=60)
    assert p.returncode == 3, p.stderr
    assert "efficiency / chicago-amsterdam: needs 4 cores at scale 1" in p.stderr
    assert "the run has 1" in p.stderr and "SCALE=0.1" in p.stderr and "CORES=flag" in p.stderr
    assert not (tmp_path / "res").exists()  # refused before a results directory, namespace or process
    assert netns.list_namespaces(network.PREFIX) == before


def test_the_cores_command_lists_every_part_and_fails_where_the_machine_is_too_small() -> None:
    cmd = [sys.executable, "-m", "udtbed", "cores", "--experiments", "efficiency,fairness", "--cpuset", ONE_CPU]
    p = subprocess.run(cmd, cwd=TESTBED, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "fairness / three-site" in p.stdout and " 10  TOO FEW" in p.stdout
    assert "the largest part needs 10 cores" in p.stdout
    quick = subprocess.run([*cmd, "--scale", "0.1"], cwd=TESTBED, capture_output=True, text=True, timeout=60)
    assert quick.returncode == 0 and "not checked below 0.5" in quick.stdout


def test_the_runner_starts_each_flow_end_on_its_seats_cpus(tmp_path: Path) -> None:
    udt = FakeStack("udt", "udt")
    flows = [Flow("f1", "a", "b"), Flow("f2", "a", "b")]
    seats = [cores.Seat(("flow", f, r), f"{f} {r}") for f in ("f1", "f2") for r in ("sender", "receiver")]
    pins = cores.assign(cores.CorePlan("p", (*seats, cores.Seat(("runner",), "runner"))), list(range(8)))
    rt = FakeRuntime()
    start_bulk(fake_runtime(rt), fake_net(FakeNet()), {"f1": udt, "f2": udt}, flows, tmp_path, 10, 7000, "t", pins=pins)
    # receivers (the listeners) first, then the senders
    assert [argv[1] for _, argv in rt.spawned] == ["recv", "recv", "send", "send"]
    assert rt.cpus == [frozenset({1}), frozenset({3}), frozenset({0}), frozenset({2})]


def test_the_report_names_each_seats_cpus_and_flags_a_part_run_on_too_few_cores() -> None:
    from udtbed.results.results import PartResult

    p = plan_of("efficiency", "chicago-amsterdam")
    pres = PartResult("chicago-amsterdam", "t", "t.toml", "", {}, [], True, {})
    pres.cores = cores.check(p, list(range(8)), 1.0, "auto").as_json()
    shown = parts._cores(pres)
    assert (
        "cores: 4 needed" in shown and "amsterdam sender on chicago on CPU 1" in shown and "runner on CPU 3-7" in shown
    )
    pres.cores = cores.check(p, [0, 1], 1.0, "auto").as_json()
    assert "class='bad'" in parts._cores(pres) and "too few for this scale, flagged" in parts._cores(pres)


def test_a_container_gets_its_seats_cpus_and_otherwise_the_runs_cpuset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from udtbed.emulation import runtime

    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(runtime, "docker", lambda *args, **kw: calls.append(args))

    class Net:
        tag, workdir = "t", tmp_path

        def ns(self, host: str) -> str:
            return f"udtb-t-h{host}"

    rt = runtime.DockerRuntime(fake_net(Net()), runtime.StacksImage("img", "sha256:1", {}), cpuset="2-15")
    rt.spawn("a", ["sleep", "1"], cpus=frozenset({3, 4, 5}))
    rt.spawn("a", ["sleep", "1"])
    flags = [c[c.index("--cpuset-cpus") + 1] for c in calls]
    assert flags == ["3-5", "2-15"]


def allowed_cpus(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split()[1]
    raise AssertionError(f"no Cpus_allowed_list for {pid}")


@pytest.mark.needs_root
def test_the_emulator_and_a_stack_process_run_only_on_the_cpus_they_were_given(tmp_path: Path) -> None:
    from udtbed.emulation.network import Network
    from udtbed.emulation.runtime import NamespaceRuntime

    if not network.LINKEM.exists():
        pytest.skip(f"{network.LINKEM} is not built")
    last = max(os.sched_getaffinity(0))
    topo = load(TESTBED.parent / "topologies/chicago-ottawa.toml")
    with Network(topo, scale=0.1, backend="linkem", workdir=tmp_path, link_cpus={0: frozenset({last})}) as net:
        assert allowed_cpus(net.emulators[0].pid) == str(last)
        rt = NamespaceRuntime(net)
        try:
            pinned = rt.spawn("chicago", ["sleep", "30"], cpus=frozenset({last}))
            free = rt.spawn("ottawa", ["sleep", "30"])
            assert allowed_cpus(pinned.pid) == str(last)
            assert allowed_cpus(free.pid) == cores.cpu_list(os.sched_getaffinity(0))
        finally:
            rt.stop_all()


@pytest.mark.needs_root
def test_scale_auto_skips_the_scales_whose_parts_do_not_fit_without_calibrating_them() -> None:
    from udtbed.commands.shared import choose_scale

    if not network.LINKEM.exists():
        pytest.skip(f"{network.LINKEM} is not built")
    lines: list[str] = []

    def too_big(s: float) -> list[str]:
        return ["efficiency / chicago-amsterdam: needs 4 cores"] if s >= cores.CHECKED_FROM else []

    scale, why = choose_scale("auto", "linkem", lines.append, too_big)
    assert scale <= 0.2
    assert "scale 1.0: efficiency / chicago-amsterdam: needs 4 cores" in why and "scale 0.5:" in why
    calibrated = [line for line in lines if line.startswith("scale auto: calibrating")]
    assert calibrated and "at scale 0.2" in calibrated[0], lines
