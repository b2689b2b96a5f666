"""Packet captures of a part: which net carried what, and the data packets' spacing.

With ``capture = true`` a part runs ``tcpdump`` on every interface of every host while its flows
run (the first 96 bytes of each IPv4 frame, nanosecond stamps; the harness's command line,
:func:`udtharness.capture.command`). :func:`summarize` then reads the
captures with the suite's own pcap reader (:mod:`udtharness.pcap`) and says, per host interface,
how many UDP data packets (first word's top bit 0: a UDT, SABUL or FRTP DATA packet), other UDP
packets (UDT's control packets) and TCP segments (SABUL's and FRTP's ACK/ERR channel) it saw.

For a stack with a control path (:attr:`udtbed.experiments.stacks.Stack.control_net`, FRTP.md §1) that is
the proof the paths are apart: DATA only on the data net (the circuit), TCP control only on the
control net. The inter-packet times of the data packets a sender put on its data interface are
the FRTP paper's Fig. 5 (its pacer's spacing before the emulated circuit touches them).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from udtharness import capture as live
from udtharness import pcap

from .network import Network
from .runtime import HostRuntime

SNAPLEN = 96
QUANTILES = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)


def interfaces(net: Network, host: str) -> list[str]:
    """A host's interfaces: one per net it has a link on, named after the net."""
    return sorted({link.net for link in net.topo.links if host in (link.a, link.b)})


def command(ifname: str, path: Path) -> list[str]:
    """The harness's tcpdump command line (:func:`udtharness.capture.command`) for one host
    interface: every IPv4 frame, its first :data:`SNAPLEN` bytes, nanosecond stamps, written
    packet by packet; tcpdump's own buffer and batching (no ``-B``, no immediate mode)."""
    return live.command(
        ifname, path, "ip", tool="tcpdump", snaplen=SNAPLEN, nano=True, immediate=False, buffer_mib=None
    )


def start(rt: HostRuntime, net: Network, workdir: Path, tag: str) -> dict[str, Path]:
    """tcpdump on every host interface, started by the runtime on that host (the namespace
    runtime's: a :mod:`udtharness.processes` process in the host's namespace);
    ``{"host/iface": pcap path}``. The runtime's ``stop_all`` ends them (SIGINT: tcpdump writes
    what it has and exits)."""
    out = {}
    for host in net.topo.hosts:
        for ifname in interfaces(net, host):
            path = workdir / f"{tag}-{host}-{ifname}.pcap"
            rt.spawn(host, command(ifname, path), stderr=workdir / f"{tag}-{host}-{ifname}.tcpdump.log")
            out[f"{host}/{ifname}"] = path
    return out


def _is_data(payload: bytes) -> bool:
    # UDT4.md §3, SABUL.md §3.1 (FRTP's too): a DATA packet's first word is its sequence number, top bit 0.
    return len(payload) >= 4 and payload[0] & 0x80 == 0


def ipt_stats(times: list[float], settle_s: float = 1.0) -> dict[str, Any]:
    """Inter-packet times (µs) of packets stamped at ``times`` (s): mean, standard deviation, the
    variance in ms² and s² (the paper's 0.00005 gives no unit), the largest gap, a robust spread
    (``sigma_iqr_us``), quantiles and a
    CDF of at most 200 points; ``steady``: the same after the first ``settle_s`` seconds (the
    start-up's one-off gaps left out)."""
    gaps = [(b - a) * 1e6 for a, b in zip(times, times[1:], strict=False)]
    out = _gap_stats(gaps)
    if times and len(gaps) > 2:
        later = [g for t, g in zip(times[1:], gaps, strict=True) if t - times[0] > settle_s]
        steady = _gap_stats(later)
        steady.pop("cdf_us", None)
        out["steady"] = steady
    return out


def _gap_stats(gaps: list[float]) -> dict[str, Any]:
    gaps = sorted(gaps)
    n = len(gaps)
    if n < 2:
        return {"n": n}
    std = statistics.pstdev(gaps)
    step = max(1, n // 200)
    return {
        "n": n,
        "mean_us": round(statistics.fmean(gaps), 3),
        "std_us": round(std, 3),
        "var_ms2": (std / 1e3) ** 2,
        "var_s2": (std / 1e6) ** 2,
        "max_us": round(gaps[-1], 3),
        # A spread the few late wake-ups of a loaded machine do not dominate: the interquartile
        # range over 1.349, which is the standard deviation for normally distributed gaps.
        "sigma_iqr_us": round((gaps[(3 * n) // 4] - gaps[n // 4]) / 1.349, 3),
        "quantiles_us": {f"p{round(q * 100)}": round(gaps[min(n - 1, int(q * n))], 3) for q in QUANTILES},
        "cdf_us": [[round(gaps[i], 3), round((i + 1) / n, 5)] for i in range(0, n, step)],
    }


def summarize(files: dict[str, Path], net: Network, senders: dict[str, str], control_net: str | None) -> dict[str, Any]:
    """What each host interface carried, whether the data and control paths stayed apart (only
    for a stack with ``control_net``), and per flow the inter-packet times of the DATA its
    sender put on its data interface (``senders``: flow name -> sender host)."""
    per_iface: dict[str, dict[str, int]] = {}
    data_times: dict[str, list[float]] = {}
    for key, path in files.items():
        counts = {"udp_data": 0, "udp_other": 0, "tcp": 0}
        host, ifname = key.split("/")
        mine = net.address(host, ifname)
        times: list[float] = []
        try:
            frames = pcap.read_frames(path)
        except (OSError, pcap.PcapError):
            per_iface[key] = counts | {"unreadable": 1}
            continue
        for _, p in frames:
            if isinstance(p, pcap.TcpSegment):
                counts["tcp"] += 1
            elif _is_data(p.payload):
                counts["udp_data"] += 1
                if p.src[0] == mine:
                    times.append(p.time)
            else:
                counts["udp_other"] += 1
        per_iface[key] = counts
        data_times[key] = times
    out: dict[str, Any] = {"interfaces": per_iface}
    if control_net is not None:
        data = [c for k, c in per_iface.items() if k.split("/")[1] != control_net]
        ctrl = [c for k, c in per_iface.items() if k.split("/")[1] == control_net]
        udp_on_control = sum(c["udp_data"] + c["udp_other"] for c in ctrl)
        tcp_on_data = sum(c["tcp"] for c in data)
        out["udp_on_control"], out["tcp_on_data"] = udp_on_control, tcp_on_data
        out["separated"] = (
            udp_on_control == 0
            and tcp_on_data == 0
            and sum(c["udp_data"] for c in data) > 0
            and sum(c["tcp"] for c in ctrl) > 0
        )
    out["ipt"] = {
        flow: ipt_stats(data_times.get(f"{host}/data", []))
        for flow, host in senders.items()
        if f"{host}/data" in data_times
    }
    return out
