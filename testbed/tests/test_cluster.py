"""A run across several servers (udtbed.emulation.cluster) on the lab of this machine (udtbed.emulation.lab): three
"servers", each sshd in namespaces of its own, joined by veth "cables"; the runner reaches them
only over SSH. One Fig. 11 path across them (sender, delay node, receiver apart) for udt-rs and
libudt; the refusals before anything is built; nothing left on any server, interrupted or not."""

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import have_linkem, interruptible, root_links, udtbed_run_argv
from udtbed.emulation.cluster import Cluster, ClusterError
from udtbed.emulation.lab import Lab, leftovers
from udtbed.emulation.topology import load as load_topology

REPO = Path(__file__).resolve().parents[2]
OTTAWA = REPO / "topologies/chicago-ottawa.toml"
# A finite transfer on Fig. 11's Ottawa path, so that the run checks it byte for byte.
EXPERIMENT = """
name = "cluster-ottawa"
title = "Chicago-Ottawa across three servers"
figure = "SC'04 Fig. 11"

[[part]]
label = "chicago-ottawa"
topology = "chicago-ottawa"
protocols = ["udt"]
flows = [{ name = "ottawa", src = "chicago", dst = "ottawa", io = "disk", size = 3000000 }]
"""


def servers_file(tmp: Path, text: str) -> Path:
    path = tmp / "servers.toml"
    path.write_text(text)
    return path


# --- the servers file and placement (no root) -------------------------------------------------


def test_servers_file_names_the_key_that_is_wrong(tmp_path: Path) -> None:
    cases = {
        "[servers.a]\nssh = 'x'\n": "name two servers or more",
        "[servers.a]\nssh = 'x'\n[servers.b]\nport = 22\nssh = 'y'\n": "unknown key 'port'",
        "[servers.a]\nssh = 'x'\n[servers.b]\n": 'ssh = "user@host" is required',
        "[servers.a]\nssh = 'x'\ncpus = '3-1'\n[servers.b]\nssh = 'y'\n": "cpus",
        "[servers.a]\nssh = 'x'\n[servers.a.underlay]\nc = 'eth1'\n[servers.b]\nssh = 'y'\n": "'c' is not a server",
        "[servers.a]\nssh = 'x'\n[servers.b]\nssh = 'y'\n[placement]\nchicago = 'z'\n": "'z', which is not a server",
        "servers = 3\n[[x]]\n": "unknown table",
        "[servers.a\n": "not TOML",
    }
    for text, want in cases.items():
        with pytest.raises(ClusterError, match=want):
            Cluster.load(servers_file(tmp_path, text))


def test_default_placement_puts_sender_delay_node_and_receiver_on_three_servers(tmp_path: Path) -> None:
    c = Cluster.load(
        servers_file(
            tmp_path,
            "[servers.s]\nssh = 'a'\nunderlay = { d = 'e1' }\n"
            "[servers.d]\nssh = 'b'\nunderlay = { s = 'e2', r = 'e3' }\n"
            "[servers.r]\nssh = 'c'\nunderlay = { d = 'e4' }\n",
        )
    )
    topo = load_topology(OTTAWA)
    where = c.place(topo)
    assert where == {"chicago": "s", "link1": "d", "ottawa": "r"}
    assert c.underlays(topo, where) == [("s", "e1", "d", "e2"), ("d", "e3", "r", "e4")]


def test_placement_on_two_servers_needs_an_underlay_between_them(tmp_path: Path) -> None:
    c = Cluster.load(
        servers_file(tmp_path, "[servers.s]\nssh = 'a'\n[servers.r]\nssh = 'b'\n[placement]\nlink1 = 's'\n")
    )
    topo = load_topology(OTTAWA)
    where = c.place(topo)
    assert where == {"chicago": "s", "link1": "s", "ottawa": "r"}
    with pytest.raises(ClusterError, match=r"server s has no underlay interface to server r"):
        c.underlays(topo, where)
    bad = Cluster.load(servers_file(tmp_path, "[servers.s]\nssh = 'a'\n[servers.r]\nssh = 'b'\n[placement]\nx = 's'\n"))
    with pytest.raises(ClusterError, match="no such host, switch or emulated link"):
        bad.place(topo)


# --- on the lab ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    if not have_linkem():
        pytest.skip("udt-linkem is not built (make build)")
    with Lab(tmp_path_factory.mktemp("lab")) as lab:
        yield lab


def assert_nothing_left(lab: Lab, links_before: set[str]) -> None:
    assert leftovers(lab) == {}, "left on the servers"
    assert not list(Path("/tmp").glob("udtb-ssh-*")), "an SSH connection left open"
    assert root_links() == links_before, "links left in the root namespace"


def run(lab: Lab, results: Path, *args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    argv = udtbed_run_argv(results, "--servers", str(lab.servers_file), "--stacks", "udt-rs,libudt", *args)
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=REPO / "testbed")


@pytest.mark.needs_root
def test_fig11_path_across_three_servers_is_byte_exact_for_udt_rs_and_libudt(lab: Lab, tmp_path: Path) -> None:
    before = root_links()
    exps = tmp_path / "experiments"
    exps.mkdir()
    (exps / "cluster-ottawa.toml").write_text(EXPERIMENT)
    p = run(lab, tmp_path / "results", "--experiments-dir", str(exps), "--experiments", "all", "--duration", "15")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "1500-byte frames pass" in p.stdout
    res = tmp_path / "results/latest/cluster-ottawa.json"
    part = json.loads(res.read_text())["parts"][0]
    assert part["calibration_ok"], part["calibration"]
    assert "cluster edition" in part["links"]["0"]["built_by"]
    assert part["links"]["underlay:0"] == {"link1": "delay:eth-sender", "chicago": "sender:eth-delay"}
    assert part["links"]["underlay:1"] == {"link1": "delay:eth-receiver", "ottawa": "receiver:eth-delay"}
    for stack in ("udt-rs", "libudt"):
        (flow,) = part["stacks"][stack]["flows"]
        assert flow["exact"] is True, (stack, flow)
    meta = json.loads((tmp_path / "results/latest/run.json").read_text())
    assert meta["cluster"]["placement"]["chicago-ottawa"] == {
        "chicago": "sender",
        "link1": "delay",
        "ottawa": "receiver",
    }
    assert set(meta["cluster"]["servers"]) == {"sender", "delay", "receiver"}
    assert all(abs(s["clock_offset_ms"]) < 50 for s in meta["cluster"]["servers"].values())
    assert (res.parent / "report.html").exists()
    assert_nothing_left(lab, before)


@pytest.mark.needs_root
def test_interrupted_cluster_run_leaves_nothing_on_any_server(lab: Lab, tmp_path: Path) -> None:
    before = root_links()
    argv = udtbed_run_argv(
        tmp_path / "results",
        "--servers",
        str(lab.servers_file),
        "--stacks",
        "udt-rs",
        "--experiments",
        "efficiency",
        "--parts",
        "chicago-ottawa",
        "--duration",
        "60",
    )
    p = subprocess.Popen(
        argv,
        cwd=REPO / "testbed",
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=interruptible,
    )
    assert p.stdout is not None
    seen = ""
    deadline = time.monotonic() + 120
    while "-- udt-rs" not in seen and time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        seen += line
    assert "-- udt-rs" in seen, seen[-3000:]
    time.sleep(3)  # the flow runs, on all three servers
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 130, (seen + out)[-3000:]
    assert_nothing_left(lab, before)


@pytest.mark.needs_root
def test_underlay_that_cannot_carry_1500_byte_frames_is_refused_before_anything_is_built(
    lab: Lab, tmp_path: Path
) -> None:
    before = root_links()
    lab.set_mtu(1400)
    try:
        p = run(lab, tmp_path / "results", "--experiments", "efficiency", "--parts", "chicago-ottawa", timeout=120)
    finally:
        lab.set_mtu(1500)
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-2000:]
    assert "refused before anything was built" in p.stderr
    assert "does not carry a 1500-byte frame" in p.stderr and "MTU 1400" in p.stderr
    assert "building" not in p.stdout
    assert_nothing_left(lab, before)


@pytest.mark.needs_root
def test_server_that_cannot_be_reached_is_refused_with_its_name(lab: Lab, tmp_path: Path) -> None:
    text = lab.servers_file.read_text().replace('ssh = "root@10.249.1.2"', 'ssh = "root@10.249.1.3"')
    bad = servers_file(tmp_path, text)
    argv = udtbed_run_argv(tmp_path / "results", "--servers", str(bad), "--stacks", "udt-rs")
    argv += ["--experiments", "efficiency", "--parts", "chicago-ottawa"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO / "testbed")
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-2000:]
    assert "server delay (root@10.249.1.3) cannot be reached over SSH" in p.stderr
    assert "building" not in p.stdout
    assert not list(Path("/tmp").glob("udtb-ssh-*"))
    assert leftovers(lab) == {}


@pytest.mark.needs_root
def test_cores_plans_each_parts_seats_on_the_servers_it_places_them_on(lab: Lab) -> None:
    argv = [sys.executable, "-m", "udtbed", "cores", "--servers", str(lab.servers_file), "--experiments", "efficiency"]
    p = subprocess.run([*argv, "--scale", "1"], capture_output=True, text=True, timeout=120, cwd=REPO / "testbed")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "servers: sender 2 CPUs, delay 2 CPUs, receiver 2 CPUs" in p.stdout
    (line,) = [x for x in p.stdout.splitlines() if "efficiency / chicago-ottawa" in x]
    assert "fits" in line and "delay 1/2, sender 1/2, receiver 1/2" in line, line
    assert not list(Path("/tmp").glob("udtb-ssh-*"))
