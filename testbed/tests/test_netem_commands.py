"""The netem backend's tc commands: iproute2 accepts every one the topologies can produce.

These run on any kernel; where it has no sch_netem (our machines), what they prove is that tc's
own option parser accepts each generated command (a parse error prints "What is ..." or the
usage and never reaches the kernel), that the tbf + bfifo chain of byte-counted queues works for
real, and that the Gilbert–Elliott parameters reach the kernel with the meaning our topology
files give them. The backend itself runs end to end in ``test_netem_kernel.py`` (``make test-vm``
boots a stock kernel for it).
"""

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from udtbed.emulation import network
from udtbed.emulation.topology import Direction, Queue, load, parse_loss, scaled_direction
from udtharness import netns

TOPOLOGIES = sorted((Path(__file__).resolve().parents[2] / "topologies").glob("*.toml"))
LOSSES = ["0.001", "0.5%", "random:0.01", "random:2%", "ge:0.0005,0.2,1", "ge:0.01,0.3,0.8,0.001"]
UNKNOWN_KIND = "Specified qdisc kind is unknown"


def generated_commands() -> dict[tuple[str, ...], str]:
    """Every distinct command list netem_args produces -> where it came from."""
    cases: dict[tuple[str, ...], str] = {}

    def add(d: Direction, q: tuple[int | None, int | None], origin: str) -> None:
        cmds = network.netem_args(d, *q)
        cases.setdefault(tuple("\0".join(c) for c in cmds), origin)

    for f in TOPOLOGIES:
        topo = load(f)
        for link in topo.links:
            if not link.emulated:
                continue
            for name, d in (("forward", link.forward), ("reverse", link.reverse)):
                for scale in (1.0, 0.1):
                    add(
                        scaled_direction(d, scale),
                        topo.queue_limit(link, d, scale),
                        f"{f.name} link {link.index} {name} scale {scale}",
                    )
    for loss in LOSSES:
        parse_loss(loss)  # the test's specs are valid topology values
        for rate, queue in ((None, (None, None)), (62.2e6, (83, None)), (100e6, (None, 64 * 1024))):
            d = Direction(delay_s=0.008, rate_bps=rate, queue=Queue(), loss=loss)
            add(d, queue, f"loss {loss} rate {rate} queue {queue}")
    return cases


def tc(ns: str, *args: str) -> subprocess.CompletedProcess[str]:
    return netns.sh("tc", "qdisc", "add", "dev", "v0", *args, ns=ns, check=False)


@pytest.fixture
def scratch_veth(request: pytest.FixtureRequest) -> Iterator[str]:
    """A veth pair v0/v1 in a scratch namespace (named udtb-<pid>-tc, removed afterwards)."""
    ns = f"{network.PREFIX}{os.getpid()}-tc"
    netns.sh("ip", "netns", "add", ns)
    try:
        netns.sh("ip", "link", "add", "v0", "type", "veth", "peer", "name", "v1", ns=ns)
        netns.sh("ip", "link", "set", "v0", "up", ns=ns)
        yield ns
    finally:
        netns.kill_namespace(ns)


def kind(cmd: list[str]) -> str:
    return cmd[cmd.index("handle") + 2]


@pytest.mark.needs_root
def test_tc_accepts_every_generated_netem_command(scratch_veth: str) -> None:
    """Each command of each chain: accepted by the kernel where it has netem; elsewhere a netem
    command may be refused only by the kernel (tc parsed it), and a tbf chain is built for real
    at the root."""
    ns = scratch_veth
    have_netem, _ = network.probe_netem()
    cases = generated_commands()
    assert len(cases) >= 20
    problems = []

    def kernel_only_refuses(cmd: list[str], origin: str) -> None:
        p = tc(ns, *cmd)
        if have_netem:
            if p.returncode != 0:
                problems.append(f"{origin}: `tc qdisc add dev v0 {' '.join(cmd)}`: {p.stderr.strip()}")
        elif UNKNOWN_KIND not in p.stderr or "What is" in p.stderr or "Usage" in p.stderr:
            # Only the kernel may refuse it: anything else is tc's parser rejecting our options.
            problems.append(f"{origin}: `tc qdisc add dev v0 {' '.join(cmd)}` rc {p.returncode}: {p.stderr.strip()}")

    for key, origin in cases.items():
        cmds = [c.split("\0") for c in key]
        netem, chain = cmds[0], cmds[1:]
        assert kind(netem) == "netem" and all(c[0] == "parent" for c in chain), origin
        kernel_only_refuses(netem, origin)
        if chain and not have_netem:
            if kind(chain[0]) == "netem":
                # The rate stage is a netem too: tc's parser is all this kernel can check.
                kernel_only_refuses(["root"] + chain[0][2:], origin)
                netns.sh("tc", "qdisc", "del", "dev", "v0", "root", ns=ns, check=False)
                continue
            # No netem to hang the chain from: the tbf (rate) goes at the root, its fifo below as generated.
            chain = [["root"] + chain[0][2:]] + chain[1:]
        for c in chain:
            q = tc(ns, *c)
            if q.returncode != 0:
                problems.append(f"{origin}: `tc qdisc add dev v0 {' '.join(c)}`: {q.stderr.strip()}")
        if chain:
            shown = netns.sh("tc", "qdisc", "show", "dev", "v0", ns=ns).stdout
            for c in chain:
                if not re.search(rf"qdisc {kind(c)} {c[c.index('handle') + 1]} ", shown):
                    problems.append(f"{origin}: {kind(c)} missing from `tc qdisc show`: {shown.strip()}")
        netns.sh("tc", "qdisc", "del", "dev", "v0", "root", ns=ns, check=False)
    assert not problems, "\n".join(problems)


def netem_loss_attribute(strace_out: str) -> bytes:
    """The bytes of TCA_OPTIONS of the RTM_NEWQDISC request in ``strace -xx`` output."""
    m = re.search(r'nla_type=TCA_OPTIONS\}, "((?:\\x[0-9a-f]{2})+)"', strace_out)
    assert m, strace_out
    return bytes(int(h, 16) for h in re.findall(r"\\x([0-9a-f]{2})", m.group(1)))


@pytest.mark.needs_root
@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace (ci/setup.sh installs it)")
@pytest.mark.parametrize("spec", ["ge:0.0005,0.2,1", "ge:0.01,0.3,0.8,0.001"])
def test_gilbert_elliott_loss_reaches_the_kernel_as_loss_in_bad_and_good(scratch_veth: str, spec: str) -> None:
    """The kernel (sch_netem.c, loss_gilb_ell) drops a frame in Bad when a random u32 > h and
    in Good when it is < k1; tc sends netem's h (delivery in Bad) and k1. So h must be 1 - our h
    and k1 our k, whatever tc's argument names suggest."""
    p, r, h, *k = [float(x) for x in spec[3:].split(",")]
    k0 = k[0] if k else 0.0
    netem = network.netem_args(Direction(delay_s=0.001, loss=spec), None, None)[0]
    out = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            scratch_veth,
            "strace",
            "-f",
            "-e",
            "trace=sendmsg",
            "-xx",
            "-s",
            "4096",
            "tc",
            "qdisc",
            "add",
            "dev",
            "v0",
            *netem,
        ],
        capture_output=True,
        text=True,
    ).stderr
    opts = netem_loss_attribute(out)
    # struct tc_netem_qopt (24 bytes), then TCA_NETEM_LOSS (nested) holding NETEM_LOSS_GE:
    # struct tc_netem_gemodel { u32 p, r, h, k1 }.
    at = opts.find(bytes([20, 0, 2, 0]), 24)
    assert at > 0, opts.hex()
    gp, gr, gh, gk1 = (int.from_bytes(opts[at + 4 + 4 * i : at + 8 + 4 * i], "little") / 2**32 for i in range(4))
    assert gp == pytest.approx(p, abs=1e-6)
    assert gr == pytest.approx(r, abs=1e-6)
    assert 1 - gh == pytest.approx(h, abs=1e-6), "loss probability in Bad"
    assert gk1 == pytest.approx(k0, abs=1e-6), "loss probability in Good"
