"""Topology files: the shipped ones load; bad ones fail naming file, line and what is wrong.
A built topology is made of Mininet nodes and has the configured delays."""

import importlib.machinery
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from udtbed.emulation import network
from udtbed.emulation.topology import TopologyError, load
from udtharness import netns

TOPOLOGIES = sorted((Path(__file__).resolve().parents[2] / "topologies").glob("*.toml"))

GOOD = """name = "t"
[hosts]
x = {}
y = {}
[[link]]
ends = ["x", "y"]
delay = "5ms"
rate = "100mbit"
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "t.toml"
    p.write_text(text)
    return p


def test_shipped_topologies_load() -> None:
    assert len(TOPOLOGIES) >= 7
    for f in TOPOLOGIES:
        load(f)


def test_paper_paths_have_the_papers_rtt_and_rate() -> None:
    d = Path(TOPOLOGIES[0]).parent
    t = load(d / "chicago-amsterdam.toml")
    assert t.expected_rtt_s("chicago", "amsterdam") == pytest.approx(0.110)
    assert t.bottleneck_bps("chicago", "amsterdam") == 1e9
    t = load(d / "three-site.toml")
    assert t.bottleneck_bps("chicago", "ottawa", scale=0.1) == pytest.approx(62.2e6)
    assert t.expected_rtt_s("chicago", "ottawa") == pytest.approx(0.016)
    assert [h.to for h in t.route("chicago", "amsterdam")] == ["starlight", "amsterdam"]
    t = load(d / "frtp-circuit.toml")
    assert t.address("sender", "data") != t.address("sender", "control")


def test_bdp_queue_scales_with_rate() -> None:
    t = load(Path(TOPOLOGIES[0]).parent / "chicago-amsterdam.toml")
    link = t.links[0]
    assert t.queue_limit(link, link.forward, 1.0)[0] == 9082  # 1 Gb/s x 110 ms / 1514 B
    assert t.queue_limit(link, link.forward, 0.1)[0] == 909


@pytest.mark.parametrize(
    "edit, line, words",
    [
        (lambda s: s.replace('rate = "100mbit"', 'rate = "100 furlongs"'), 8, "rate"),
        (lambda s: s.replace('delay = "5ms"', 'delay = "5"'), 7, "unit"),
        (lambda s: s.replace('ends = ["x", "y"]', 'ends = ["x", "z"]'), 6, "'z' is neither a host nor a switch"),
        (lambda s: s + 'jitter = "1ms"\n', 9, "unknown key 'jitter'"),
        (lambda s: s.replace("[[link]]", "[[link]\n"), 5, "TOML syntax error"),
        (lambda s: s.replace("y = {}", "y = {}\nw = {}"), 5, "host 'w' has no link"),
        (lambda s: s + '[[link]]\nends = ["y", "x"]\n', 10, "already has a link on net 'data'"),
        (lambda s: s + '[link.reverse]\nloss = "ge:0.1,2,1"\n', 10, "within [0, 1]"),
        (lambda s: s.replace('rate = "100mbit"', 'queue = "bdp"'), 8, "queue 'bdp' needs a rate"),
        (lambda s: s.replace("x = {}", 'x = { nic = "1gbit" }'), 3, "nic = { rate"),
        (lambda s: s.replace("x = {}", 'x = { nic = { rate = "fast" } }'), 3, "'x': nic: rate"),
        (lambda s: s.replace("x = {}", 'x = { nic = { rate = "1gbit", queue = "bdp" } }'), 3, "not 'bdp'"),
        (lambda s: s.replace("x = {}", "x = { cpu = 1 }"), 3, "takes 'nic = "),
    ],
)
def test_bad_file_error_names_file_line_and_problem(
    tmp_path: Path, edit: Callable[[str], str], line: int, words: str
) -> None:
    p = write(tmp_path, edit(GOOD))
    with pytest.raises(TopologyError) as e:
        load(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:{line}"), msg
    assert words in msg, msg


def test_a_host_nic_is_a_bottleneck_of_its_paths_with_a_scaled_transmit_queue(tmp_path: Path) -> None:
    t = load(write(tmp_path, GOOD.replace("x = {}", 'x = { nic = { rate = "50mbit", queue = "200p" } }')))
    assert t.bottleneck_bps("x", "y") == 50e6 and t.bottleneck_bps("y", "x") == 100e6
    assert t.nics["x"].limit_bytes(1.0) == 200 * 1514 and t.nics["x"].limit_bytes(0.1) == 20 * 1514
    assert network.nic_args(t.nics["x"], 0.1)[:3] == ["tbf", "rate", "5000000bit"]
    assert (
        load(write(tmp_path, GOOD.replace("x = {}", 'x = { nic = { rate = "1gbit" } }'))).nics["x"].queue.packets
        == 1000
    )


def test_loop_without_stp_is_rejected(tmp_path: Path) -> None:
    text = GOOD.replace("y = {}", "y = {}\n[switches]\ns1 = {}\ns2 = {}") + "".join(
        f'[[link]]\nends = ["{a}", "{b}"]\n' for a, b in (("s1", "s2"), ("s2", "s1"))
    )
    with pytest.raises(TopologyError, match="closes a loop"):
        load(write(tmp_path, text))


def test_mininet_is_loaded_alone_from_debians_package() -> None:
    """From the venv, only the mininet package comes from dist-packages; without it, a clear error."""
    if importlib.machinery.PathFinder.find_spec("mininet") is not None:
        pytest.skip("this interpreter imports mininet from its own sys.path")
    code = (
        "import sys; from udtbed.emulation import network; network.mininet(); site = str(network.MININET_SITE); "
        "print(site not in sys.path, sorted({m.split('.')[0] for m, v in list(sys.modules.items()) "
        "if (getattr(v, '__file__', '') or '').startswith(site)}))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "['mininet']"], r.stdout
    code = "from udtbed.emulation import network; network.mininet()"
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[1],
        env={**os.environ, "UDTBED_MININET_SITE": "/nonexistent"},
    )
    assert r.returncode != 0 and "MininetMissing" in r.stderr and "make setup" in r.stderr, r.stderr


def shell_argv(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_text().split("\0")[:-1]


@pytest.mark.needs_root
@pytest.mark.slow
def test_nodes_are_mininet_nodes_and_hosts_see_the_configured_rtt(tmp_path: Path) -> None:
    """chicago-ottawa at scale 0.1: each node is a Mininet node (its shell runs in the named
    namespace), interfaces carry the configured names, nothing lands in the root namespace,
    and a ping through the emulated link takes the configured 16 ms."""
    from conftest import root_links
    from udtbed.emulation.calibrate import ping
    from udtbed.emulation.network import Network

    if not network.LINKEM.exists():
        pytest.skip(f"{network.LINKEM} is not built")
    before = root_links()
    topo = load(Path(TOPOLOGIES[0]).parent / "chicago-ottawa.toml")
    with Network(topo, scale=0.1, backend="linkem", workdir=tmp_path) as net:
        router = net.router_ns(topo.links[0])
        expect = {net.ns("chicago"): {"data"}, net.ns("ottawa"): {"data"}, router: {"ra", "rb"}}
        for ns, ifnames in expect.items():
            node = net.nodes[ns]
            pids = [int(p) for p in netns.sh("ip", "netns", "pids", ns).stdout.split()]
            assert node.pid in pids and netns.is_node_shell(node.pid), (ns, pids)
            assert shell_argv(node.pid)[-1] == f"mininet:{ns}"
            links = netns.sh("ip", "-o", "link", "show", ns=ns).stdout
            assert ifnames <= {line.split(":")[1].strip().split("@")[0] for line in links.splitlines()}, links
        assert net.link_specs[0]["built_by"].startswith("mininet ")
        assert root_links() == before
        median, _ = ping(net, "chicago", "ottawa")
        assert median is not None and abs(median - 16.0) <= 1.0, median
    assert netns.list_namespaces(f"{network.PREFIX}{net.tag}-") == []
    assert root_links() == before


def _udp_blast(net: network.Network, host: str, to: str, sndbuf: int, count: int) -> None:
    """``count`` datagrams of 1400 bytes from ``host`` to ``to``, blocking sends, ``sndbuf`` bytes of buffer."""
    code = (
        "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
        f"s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, {sndbuf}); "
        f"[s.sendto(bytes(1400), ({to!r}, 9)) for _ in range({count})]"
    )
    netns.sh(sys.executable, "-c", code, ns=net.ns(host))


def _qdisc_counts(net: network.Network, host: str) -> tuple[int, int]:
    """(packets sent, dropped) of ``host``'s NIC (its data interface's root qdisc)."""
    import re

    text = netns.sh("tc", "-s", "qdisc", "show", "dev", "data", ns=net.ns(host)).stdout
    m = re.search(r"Sent \d+ bytes (\d+) pkt \(dropped (\d+)", text)
    assert m, text
    return int(m.group(1)), int(m.group(2))


def test_a_host_nic_blocks_a_udp_sender_whose_buffer_is_full_and_drops_what_a_large_buffer_overfills(
    tmp_path: Path,
) -> None:
    """The sending host's own NIC (tbf, 20 Mb/s, 50 packets): a socket with a 16 KiB buffer
    waits for it and loses nothing; one with 4 MiB overfills its queue, which drops."""
    from conftest import root_links
    from udtbed.emulation import hostwatch
    from udtbed.emulation.network import Network

    before = root_links()
    text = GOOD.replace("x = {}", 'x = { nic = { rate = "20mbit", queue = "50p" } }').replace(
        'delay = "5ms"\nrate = "100mbit"\n', ""
    )
    topo = load(write(tmp_path, text))
    with Network(topo, scale=1.0, backend="linkem", workdir=tmp_path) as net:
        assert net.nic_specs["x"][:3] == ["tbf", "rate", "20000000bit"]
        _udp_blast(net, "x", topo.address("y"), 16 * 1024, 500)
        sent, dropped = _qdisc_counts(net, "x")
        assert dropped == 0 and sent >= 500, (sent, dropped)
        _udp_blast(net, "x", topo.address("y"), 4 << 20, 500)
        _, dropped = _qdisc_counts(net, "x")
        assert dropped > 100, dropped
        assert hostwatch.nic_dropped(net, "x") == dropped and hostwatch.nic_dropped(net, "y") is None
    assert netns.list_namespaces(f"{network.PREFIX}{net.tag}-") == []
    assert root_links() == before
