"""The testbed's stacks behind one interface: each registry contract's argv, which end listens,
the stats lines they write, and the order the runner starts the two ends of a flow in (the
listener first, on its own host; the other end connecting to it)."""

import json
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest
from udtbed.emulation.network import Network
from udtbed.emulation.runtime import HostRuntime
from udtbed.emulation.topology import load as load_topology
from udtbed.experiments import runner
from udtbed.experiments.experiment import Flow, FlowOptions, Part, ShortTcp
from udtbed.experiments.flows import start_bulk, transfer_for, udt_window
from udtbed.experiments.short_tcp import short_tcp_bulk
from udtbed.experiments.stacks import (
    BulkStack,
    FrtpCli,
    Iperf3Tcp,
    Role,
    SabulCli,
    Transfer,
    UdtCli,
    all_stacks,
    parse_stats_line,
)

REPO = Path(__file__).resolve().parents[2]

STATS = Path("/tmp/x.stats")
NO_TRANSFER = Transfer()


def test_the_registry_s_sabul_stack_is_driven_by_the_sabul_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SABUL_BIN", str(tmp_path / "my-sabul"))
    stack = all_stacks()["sabul"]
    assert isinstance(stack, SabulCli) and stack.protocol == "sabul"
    assert stack.binary == tmp_path / "my-sabul"  # SABUL_BIN overrides the meta.toml binary
    ok, why = stack.available()
    assert not ok and "is not built" in why


def test_both_built_udt_stacks_take_a_window_and_a_udp_send_buffer() -> None:
    for name in ("udt-rs", "libudt"):
        stack = all_stacks()[name]
        if not stack.available()[0]:
            pytest.skip(f"{name} is not built")
        assert stack.takes("udt_window") and stack.takes("udp_buffer"), name


def test_sabul_s_sender_listens_on_its_own_address_and_the_receiver_connects_to_it() -> None:
    s = SabulCli("sabul", Path("/bin/sabul"))
    assert (s.listener, s.connector(), s.sender_stats) == ("sender", "receiver", True)
    assert s.sender("10.100.0.1", 7000, 20, stats=STATS) == [
        "/bin/sabul", "send", "--listen", "10.100.0.1:7000", "--input", "/dev/zero",
        "--stats", str(STATS), "--stats-interval", "200",
    ]  # fmt: skip
    # A scaled run starts at the default 10 µs interval's 1200 Mb/s times the scale, as the links.
    assert s.sender("10.100.0.1", 7000, 20, scale=0.1)[6:12] == [
        "--rate",
        "120",
        "--max-rate",
        "120",
        "--min-rate",
        "1.2",
    ]
    argv, stdout = s.receiver("10.100.0.1", 7000, STATS)
    assert stdout is None
    assert argv == [
        "/bin/sabul", "recv", "--connect", "10.100.0.1:7000", "--output", "/dev/null",
        "--stats", str(STATS), "--stats-interval", "200",
    ]  # fmt: skip


def test_udt_and_tcp_receivers_listen_and_their_senders_connect() -> None:
    udt, tcp = UdtCli("udt-rs", Path("/bin/udt")), Iperf3Tcp("tcp-cubic", "cubic")
    assert (udt.listener, udt.connector(), tcp.listener) == ("receiver", "sender", "receiver")
    assert udt.receiver("10.100.0.2", 7000, STATS)[0][2:4] == ["--listen", "0.0.0.0:7000"]
    assert udt.sender("10.100.0.2", 7000, 20)[2:4] == ["--connect", "10.100.0.2:7000"]
    assert tcp.sender("10.100.0.2", 7000, 20)[:3] == ["iperf3", "-c", "10.100.0.2"]
    assert (udt.sender_stats, tcp.sender_stats) == (True, False)


def test_a_sabul_receiver_s_stats_line_is_a_sample() -> None:
    # As udtconf.sabul writes it (docs/cli.md's keys; the stack name is not looked at).
    line = {"stack": "sabul-py", "role": "recv", "t": 1.2, "bytes": 1456000, "mbps": 9.7, "losses": 3}
    sample = parse_stats_line(json.dumps(line))
    assert sample is not None and (sample.t, sample.bytes) == (1.2, 1456000)
    assert sample.stats is not None and sample.stats["losses"] == 3
    assert parse_stats_line(json.dumps(line | {"summary": True})) is None


class FakeStack(BulkStack):
    def __init__(self, name: str, protocol: str, listener: Role = "receiver", ok: bool = True):
        self.name, self.protocol, self.listener, self.ok = name, protocol, listener, ok

    def available(self) -> tuple[bool, str]:
        return self.ok, "fake"

    def receiver(
        self, addr: str, port: int, stats: Path, transfer: Transfer = NO_TRANSFER
    ) -> tuple[list[str], Path | None]:
        return [self.name, "recv", f"{addr}:{port}"] + ([transfer.data_addr] if transfer.data_addr else []), None

    def sender(
        self,
        addr: str,
        port: int,
        seconds: float,
        stats: Path | None = None,
        scale: float = 1.0,
        transfer: Transfer = NO_TRANSFER,
    ) -> list[str]:
        return [self.name, "send", f"{addr}:{port}"]


class FakeRuntime:
    """Records what the runner spawns and starts nothing (no process back): not a whole
    :class:`HostRuntime`, so the tests hand it over with :func:`fake_runtime`."""

    def __init__(self) -> None:
        self.spawned: list[tuple[str, list[str]]] = []
        self.cpus: list[frozenset[int] | None] = []

    def spawn(
        self,
        host: str,
        argv: list[str],
        stdout: Path | None = None,
        stderr: Path | None = None,
        env: dict[str, str] | None = None,
        cpus: frozenset[int] | None = None,
    ) -> None:
        self.spawned.append((host, argv))
        self.cpus.append(cpus)


class FakeNet:
    """The addresses of hosts a and b, all the runner reads of a built network here: the tests
    hand it over with :func:`fake_net`."""

    def address(self, host: str, net: str = "data") -> str:
        return {"a": "10.0.0.1", "b": "10.0.0.2"}[host].replace("10.0", "10.9" if net == "control" else "10.0")


def fake_runtime(rt: FakeRuntime) -> HostRuntime:
    return cast(HostRuntime, rt)


def fake_net(net: object) -> Network:
    """A stand-in with the parts of a :class:`Network` the code under test reads."""
    return cast(Network, net)


def test_the_runner_starts_each_listener_first_and_connects_the_other_end_to_its_host(tmp_path: Path) -> None:
    sabul, udt = FakeStack("sabul", "sabul", listener="sender"), FakeStack("udt", "udt")
    flows = [Flow("s", "a", "b"), Flow("u", "a", "b")]
    rt = FakeRuntime()
    started = start_bulk(fake_runtime(rt), fake_net(FakeNet()), {"s": sabul, "u": udt}, flows, tmp_path, 10, 7000, "t")
    assert rt.spawned == [
        ("a", ["sabul", "send", "10.0.0.1:7000"]),  # SABUL's sender listens on its host, a
        ("b", ["udt", "recv", "10.0.0.2:7001"]),  # UDT's receiver on b
        ("b", ["sabul", "recv", "10.0.0.1:7000"]),  # then the SABUL receiver connects to a
        ("a", ["udt", "send", "10.0.0.2:7001"]),
    ]
    assert [(s.flow.name, s.stack.name) for s in started] == [("s", "sabul"), ("u", "udt")]


def _part(flows: tuple[Flow, ...], protocols: tuple[str, ...] | None = None) -> Part:
    return Part("p", Path("t.toml"), flows, protocols=protocols)


def test_a_part_runs_once_per_stack_under_test_of_its_protocols_with_the_flows_that_name_their_own() -> None:
    tcp = FakeStack("tcp-cubic", "tcp")
    reg = {"tcp-cubic": tcp}
    sabul, udt = FakeStack("sabul", "sabul", listener="sender"), FakeStack("udt-rs", "udt")
    mixed = _part((Flow("sabul1", "a", "b"), Flow("tcp1", "a", "b", stack="tcp-cubic")), ("sabul",))
    (only,) = runner.lineups(mixed, [udt, sabul], reg)
    assert (only.name, only.protocol, only.under_test) == ("sabul", "sabul", sabul)
    assert dict(only.flow_stacks) == {"sabul1": sabul, "tcp1": tcp}
    with pytest.raises(runner.PartSkipped, match="runs sabul stacks under test"):
        runner.lineups(mixed, [udt], reg)
    reg["tcp-cubic"] = FakeStack("tcp-cubic", "tcp", ok=False)
    with pytest.raises(runner.PartSkipped, match="need stack tcp-cubic, which is not available"):
        runner.lineups(mixed, [sabul], reg)


def test_a_part_whose_flows_all_name_their_stack_is_a_baseline_run_once() -> None:
    tcp = FakeStack("tcp-cubic", "tcp")
    base = _part(tuple(Flow(f"tcp{i}", "a", "b", stack="tcp-cubic") for i in range(4)))
    assert base.baseline and not base.runs("tcp")
    (only,) = runner.lineups(base, [FakeStack("sabul", "sabul"), tcp], {"tcp-cubic": tcp})
    assert (only.name, only.protocol, only.under_test) == ("tcp-cubic", "tcp", None)
    assert runner.part_runs(base, []) == 1  # whatever the run's stacks


def test_frtp_s_sender_listens_on_its_control_address_and_the_receiver_binds_data_on_its_circuit_address() -> None:
    s = FrtpCli("frtp", Path("/bin/frtp"))
    assert (s.listener, s.control_net, s.protocol) == ("sender", "control", "frtp")
    t = Transfer(data_addr="10.100.0.2", rate_mbps=95, udp_buffer=6554, frtp_buffer=4096000)
    argv, _ = s.receiver("10.101.0.1", 7000, STATS, t)
    assert argv[:6] == ["/bin/frtp", "recv", "--connect", "10.101.0.1:7000", "--output", "/dev/null"]
    options = dict(zip(argv[6::2], argv[7::2], strict=True))
    assert options | {"--stats": ""} == {
        "--data-bind": "10.100.0.2:0", "--rate": "95", "--udp-buffer": "6554", "--frtp-buffer": "4096000",
        "--stats": "", "--stats-interval": "200",
    }  # fmt: skip
    assert s.sender("10.101.0.1", 7000, 20, STATS, 0.1, t)[:6] == [
        "/bin/frtp", "send", "--listen", "10.101.0.1:7000", "--input", "/dev/zero",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="fixed rate"):
        s.receiver("10.101.0.1", 7000, STATS)  # the receiver chooses the rate: there is no default
    # UDT takes a fixed rate as its `fixed` controller; TCP takes none of the settings.
    assert UdtCli("u", Path("/bin/udt")).sender("a", 1, 20, transfer=Transfer(rate_mbps=5))[-2:] == ["--cc", "fixed:5"]
    # ... and a UDP buffer as its sender's kernel send buffer.
    argv = UdtCli("u", Path("/bin/udt")).sender("a", 1, 20, transfer=Transfer(udp_buffer=6554))
    assert argv[-2:] == ["--udp-sndbuf", "6554"]
    assert not Iperf3Tcp("t", "cubic").takes("rate_mbps") and s.takes("frtp_buffer")


def test_the_runner_meets_a_stack_with_a_control_path_on_that_net_and_gives_its_receiver_the_data_address(
    tmp_path: Path,
) -> None:
    frtp = FakeStack("frtp", "frtp", listener="sender")
    frtp.control_net = "control"
    rt = FakeRuntime()
    flows = [Flow("f", "a", "b")]
    transfers = {"f": Transfer(data_addr="10.0.0.2")}
    start_bulk(fake_runtime(rt), fake_net(FakeNet()), {"f": frtp}, flows, tmp_path, 10, 7000, "t", 1.0, transfers)
    assert rt.spawned == [
        ("a", ["frtp", "send", "10.9.0.1:7000"]),  # the sender listens on a's control address
        ("b", ["frtp", "recv", "10.9.0.1:7000", "10.0.0.2"]),  # data on b's own data address
    ]


def test_a_capture_tells_which_net_carried_the_data_and_which_the_control(tmp_path: Path) -> None:
    from udtbed.emulation import capture
    from udtharness.pcap import TCP_ACK, PcapWriter

    class Topo:
        hosts = ["a", "b"]

    class Net(FakeNet):
        topo = Topo()

    files: dict[str, Path] = {}
    for host, ifname in (("a", "data"), ("a", "control")):
        files[f"{host}/{ifname}"] = tmp_path / f"{host}-{ifname}.pcap"
    w = PcapWriter(files["a/data"])
    for i in range(5):  # DATA: first word a sequence number, top bit 0; 240 µs apart
        w.write(i * 240e-6, ("10.0.0.1", 5000), ("10.0.0.2", 6000), i.to_bytes(4, "big") + b"x" * 8)
    w.close()
    w = PcapWriter(files["a/control"])
    w.write_tcp(0.1, ("10.9.0.2", 40000), ("10.9.0.1", 7000), 1, TCP_ACK, b"\x00\x00\x00\x02")
    w.close()
    c = capture.summarize(files, fake_net(Net()), {"f": "a"}, "control")
    assert c["interfaces"]["a/data"] == {"udp_data": 5, "udp_other": 0, "tcp": 0}
    assert c["separated"] and c["ipt"]["f"]["n"] == 4 and c["ipt"]["f"]["mean_us"] == pytest.approx(240, abs=1)
    w = PcapWriter(files["a/control"])  # now a DATA packet strays onto the control net
    w.write(0.2, ("10.9.0.1", 5000), ("10.9.0.2", 6000), b"\x00\x00\x00\x09")
    w.close()
    assert not capture.summarize(files, fake_net(Net()), {"f": "a"}, "control")["separated"]


def test_a_part_runs_only_the_stacks_that_take_its_flows_settings() -> None:
    frtp = FrtpCli("frtp", Path("/bin/frtp"))
    tcp = Iperf3Tcp("tcp-cubic", "cubic")
    circuit = Path(__file__).resolve().parents[2] / "topologies" / "frtp-circuit.toml"
    plain = Part("p", circuit, (Flow("f", "sender", "receiver"),))
    fixed = Part("p", circuit, (Flow("f", "sender", "receiver", options=FlowOptions(rate=500)),))
    assert [x.name for x in runner.lineups(plain, [frtp, tcp], {})] == ["tcp-cubic"]  # FRTP needs a rate
    assert [x.name for x in runner.lineups(fixed, [frtp, tcp], {})] == ["frtp"]  # TCP takes none
    elsewhere = Part(
        "p", circuit.with_name("chicago-local.toml"), (Flow("f", "chicago", "local", options=fixed.flows[0].options),)
    )
    with pytest.raises(runner.PartSkipped):  # no control net there for FRTP's control path
        runner.lineups(elsewhere, [frtp], {})


def test_a_flow_s_settings_scale_as_the_links_do_and_disk_flows_get_files(tmp_path: Path) -> None:
    frtp, udt = FrtpCli("frtp", Path("/bin/frtp")), UdtCli("u", Path("/bin/udt"))
    opts = FlowOptions(rate=500, udp_buffer=65536, frtp_buffer=9_000_000)
    t = transfer_for(Flow("f", "a", "b", options=opts), frtp, fake_net(FakeNet()), 0.1, 8, tmp_path / "f")
    assert (t.rate_mbps, t.udp_buffer, t.frtp_buffer, t.data_addr) == (50, 6554, 900_000, "10.0.0.2")
    assert (t.input, t.output) == ("/dev/zero", "/dev/null")  # memory to memory
    small = FlowOptions(udp_buffer=8192, io="disk", size=1_000_000)
    t = transfer_for(Flow("f", "a", "b", options=small), udt, fake_net(FakeNet()), 0.1, 8, tmp_path / "g")
    assert t.udp_buffer == 4096 and t.data_addr is None  # a floor; UDT has one path
    assert Path(t.input).stat().st_size == 100_000 and t.output == str(tmp_path / "g.out")


def test_a_udt_flow_s_window_and_buffers_hold_what_its_path_needs_in_flight() -> None:
    # 1 Gb/s × 110 ms with a BDP queue: 9 444 packets on the wire plus 10 ms ACK periods and
    # 9 082 queued; at scale 0.1 the path needs less than 4.11's 8192 and keeps it.
    topo = load_topology(REPO / "topologies/chicago-amsterdam.toml")
    flow = Flow("f", "chicago", "amsterdam")
    assert udt_window(topo, flow, 1.0) == 20243
    assert udt_window(topo, flow, 0.1) == 8192
    # `--udt-buffers default`: 4.11's own, with which the path is window-bound.
    assert udt_window(topo, flow, 1.0, "default") == 8192
    udt = UdtCli("u", Path("/bin/udt"))
    argv, _ = udt.receiver("10.0.0.2", 9000, Path("s"), Transfer(udt_window=20243))
    assert argv[-6:] == ["--flow-window", "20243", "--rcvbuf", "20243", "--sndbuf", "40486"]
    assert "--flow-window" not in udt.sender("10.0.0.2", 9000, 10)  # not set: the stack's own


def test_a_short_flow_point_s_bulk_flows_get_the_window_and_udp_buffer_a_bulk_part_s_would(tmp_path: Path) -> None:
    class Net:  # what transfer_for reads of a built network
        topo = load_topology(REPO / "topologies/chicago-amsterdam-nic.toml")

        def address(self, host: str, net: str = "data") -> str:
            return self.topo.address(host, net)

    spec = ShortTcp("chicago", "amsterdam", (0, 3), bulk=FlowOptions(udp_buffer=65536))

    class AnyUdt(UdtCli):
        def takes(self, setting: str) -> bool:
            return True  # no binary to ask

    udt = AnyUdt("u", Path("/bin/udt"))
    flows, transfers = short_tcp_bulk(spec, 3, udt, fake_net(Net()), 0.1, 20, tmp_path / "u-n3")
    assert [f.name for f in flows] == ["bulk0", "bulk1", "bulk2"]
    for t in transfers.values():
        assert (t.udp_buffer, t.udt_window) == (6554, 8192)
        assert udt.sender("10.100.0.2", 7100, 20, transfer=t)[-2:] == ["--udp-sndbuf", "6554"]
    # At full scale the path wants more than 4.11's window; --udt-buffers default keeps 4.11's.
    wants: tuple[tuple[str, Callable[[int | None], bool]], ...] = (
        ("path", lambda w: w is not None and w > 8192),
        ("default", lambda w: w == 8192),
    )
    for buffers, want in wants:
        _, full = short_tcp_bulk(spec, 1, udt, fake_net(Net()), 1.0, 20, tmp_path / "u-n1", buffers)
        assert want(full["bulk0"].udt_window), (buffers, full["bulk0"].udt_window)
    assert short_tcp_bulk(spec, 0, udt, fake_net(Net()), 0.1, 20, tmp_path / "u-n0") == ([], {})
