"""Three bare-metal servers for a cluster run of udt-testbed: sender, delay and receiver, joined by
two point-to-point experiment links (sender-delay 10.10.1.0/24, delay-receiver 10.10.2.0/24) at a
native speed, which Emulab does not shape: the testbed's link emulator on the delay node does.

Instructions:
Each node installs iproute2, ethtool, iputils-ping, mininet and tcpdump at boot (log in
/tmp/udt-setup.log). Put the repository on /proj (shared by the nodes), run `make setup && make build`
on every node, then on each node `python3 cluster/recipes/cloudlab_profile.py --servers` prints its
[servers.NAME] block of servers.toml (docs/cluster.md); cluster/recipes/README.md has the rest.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

# (node, address, node, address) of each link, in the order the testbed's default placement uses.
LINKS = (
    ("sender", "10.10.1.1", "delay", "10.10.1.2"),
    ("delay", "10.10.2.1", "receiver", "10.10.2.2"),
)
NODES = ("sender", "delay", "receiver")
NETMASK = "255.255.255.0"
IMAGE = "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU24-64-STD"
SPEEDS = [(10000000, "10 Gb/s"), (25000000, "25 Gb/s"), (1000000, "1 Gb/s")]  # kb/s
PACKAGES = "iproute2 ethtool iputils-ping mininet tcpdump"
SETUP = (
    "(sudo apt-get update -q && sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
    f"-o DPkg::Lock::Timeout=600 {PACKAGES}) > /tmp/udt-setup.log 2>&1"
)


def underlay_device(address: str) -> str:
    """The interface that holds ``address`` here (``ip -o -4 addr show to ADDRESS``)."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show", "to", address], capture_output=True, text=True).stdout
    if not out.split():
        raise SystemExit(f"no interface here has {address}: is this node of the experiment, with its links up?")
    return out.split()[1].split("@")[0]


def servers_block(name: str) -> str:
    """This node's ``[servers.NAME]`` table of servers.toml, its underlay found by its addresses."""
    if name not in NODES:
        raise SystemExit(f"{name!r} is not a node of this profile ({', '.join(NODES)}): give --servers NAME")
    user = os.environ.get("SUDO_USER") or getpass.getuser()
    repo = Path(__file__).resolve().parents[2]
    ssh = f"{user}@{socket.getfqdn()}"
    lines = [
        f"[servers.{name}]",
        f"ssh = {json.dumps(ssh)}",
        f"repo = {json.dumps(str(repo))}",
        f"[servers.{name}.underlay]",
    ]
    for a, a_addr, b, b_addr in LINKS:
        if name == a:
            lines.append(f"{b} = {json.dumps(underlay_device(a_addr))}")
        elif name == b:
            lines.append(f"{a} = {json.dumps(underlay_device(b_addr))}")
    return "\n".join(lines) + "\n\n"


def profile() -> None:
    """Print the request RSpec (to stdout when run outside the portal)."""
    import geni.portal as portal
    import geni.rspec.pg as pg

    pc = portal.context
    pc.defineParameter("hwtype", "Hardware type (empty: any)", portal.ParameterType.NODETYPE, "")
    pc.defineParameter("image", "Disk image", portal.ParameterType.IMAGE, IMAGE)
    pc.defineParameter(
        "speed",
        "Link speed: a native speed of the hardware's experiment NICs, so that Emulab shapes nothing",
        portal.ParameterType.INTEGER,
        SPEEDS[0][0],
        SPEEDS,
    )
    params = pc.bindParameters()
    request = pc.makeRequestRSpec()

    nodes = {}
    for name in NODES:
        node = request.RawPC(name)
        node.disk_image = params.image
        if params.hwtype:
            node.hardware_type = params.hwtype
        node.addService(pg.Execute(shell="bash", command=SETUP))
        nodes[name] = node
    for a, a_addr, b, b_addr in LINKS:
        link = request.Link(f"{a}-{b}")
        for name, addr, peer in ((a, a_addr, b), (b, b_addr, a)):
            link.addInterface(nodes[name].addInterface(f"to-{peer}", pg.IPv4Address(addr, NETMASK)))
        link.bandwidth = params.speed
        link.best_effort = True
    pc.printRequestRSpec(request)


if "--servers" in sys.argv[1:]:
    args = sys.argv[sys.argv.index("--servers") + 1 :]
    sys.stdout.write(servers_block(args[0] if args else socket.gethostname().split(".")[0]))
else:
    profile()
