"""A FABRIC slice for a cluster run of udt-testbed, and its servers.toml (docs/cluster.md).

Three VMs at one site, sender, delay and receiver, each with one NIC per neighbour, joined by two
L2 networks (sender-delay, delay-receiver) that carry no addresses: the testbed takes each data
interface whole during a run. After the slice is up it brings the data interfaces up, installs
iproute2, ethtool, iputils-ping, mininet and tcpdump, writes an ssh_config (fablib's bastion jump
and the slice key) and prints servers.toml.

It needs a FABRIC account and fablib's configuration (project, token, bastion user and key, slice
key: ``fabric-cli configure setup`` or FABRIC's JupyterHub), so it cannot run in CI. ``--dry-run``
builds the same request with fablib offline and prints it and a servers.toml with placeholders,
without contacting FABRIC.

    python3 cluster/recipes/fabric_slice.py --site STAR --output servers.toml
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from fabrictestbed_extensions.fablib.config.config import ConfigException
from fabrictestbed_extensions.fablib.fablib import FablibManager

NODES = ("sender", "delay", "receiver")
LINKS = (("sender", "delay"), ("delay", "receiver"))  # the testbed's default placement follows this order
PACKAGES = "iproute2 ethtool iputils-ping mininet tcpdump"
INSTALL = (
    "sudo apt-get update -q && sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
    f"-o DPkg::Lock::Timeout=600 {PACKAGES}"
)
# topologies/chicago-ottawa.toml; any one-link topology gets the same layout from the servers' order.
PLACEMENT = {"chicago": "sender", "link1": "delay", "ottawa": "receiver"}


def peers(node: str) -> dict[str, str]:
    """``node``'s neighbours -> the L2 network to each."""
    return {(b if node == a else a): f"{a}-{b}" for a, b in LINKS if node in (a, b)}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="A FABRIC slice for a cluster run of udt-testbed, and its servers.toml.")
    p.add_argument("--name", default="udt-testbed", help="slice name (default: %(default)s)")
    p.add_argument("--site", help="FABRIC site of all three VMs (default: a random one)")
    p.add_argument("--cores", type=int, default=8)
    p.add_argument("--ram", type=int, default=32, help="GB")
    p.add_argument("--disk", type=int, default=50, help="GB")
    p.add_argument("--image", default="default_ubuntu_24")
    p.add_argument("--nic", default="NIC_Basic", choices=["NIC_Basic", "NIC_ConnectX_5", "NIC_ConnectX_6"])
    p.add_argument("--repo", help="the repository's path on the VMs (default: the head's path)")
    p.add_argument("--ssh-config", help="the ssh_config to write (default: udt_ssh_config beside fablib's)")
    p.add_argument("--output", help="write servers.toml here instead of stdout")
    p.add_argument("--dry-run", action="store_true", help="build the request offline, print it, contact nothing")
    return p.parse_args(argv)


def manager(dry_run: bool) -> FablibManager:
    if not dry_run:
        return FablibManager()
    try:
        return FablibManager(offline=True)
    except ConfigException:  # no fablib configuration here: placeholders, for the request only
        return FablibManager(offline=True, project_id="dry-run", bastion_username="dry-run")


def build(fablib: FablibManager, args: argparse.Namespace, site: str) -> Any:
    """The slice request: the three VMs, a NIC per link end, an L2 network per link."""
    slc = fablib.new_slice(name=args.name)
    nodes = {
        n: slc.add_node(name=n, site=site, cores=args.cores, ram=args.ram, disk=args.disk, image=args.image)
        for n in NODES
    }
    for a, b in LINKS:
        ends = [nodes[x].add_component(model=args.nic, name=f"to-{y}").get_interfaces()[0] for x, y in ((a, b), (b, a))]
        slc.add_l2network(name=f"{a}-{b}", interfaces=ends)
    return slc


def ssh_config_text(fablib: FablibManager) -> str:
    """fablib's bastion settings (its create_ssh_config) plus the slice key for the VMs."""
    bastion, user = fablib.get_bastion_host(), fablib.get_bastion_username()
    return (
        "# Written by cluster/recipes/fabric_slice.py: the VMs through FABRIC's bastion, with the slice key.\n"
        "UserKnownHostsFile /dev/null\nStrictHostKeyChecking no\nServerAliveInterval 120\n\n"
        f"Host {bastion}\n    User {user}\n    IdentityFile {fablib.get_bastion_key_location()}\n"
        "    IdentitiesOnly yes\n\n"
        f"Host * !{bastion}\n    ProxyJump {user}@{bastion}:22\n"
        f"    IdentityFile {fablib.get_default_slice_private_key_file()}\n    IdentitiesOnly yes\n"
    )


def servers_toml(servers: dict[str, tuple[str, dict[str, str]]], ssh_config: str, repo: str | None, what: str) -> str:
    """servers.toml: NAME -> (ssh destination, {peer: underlay interface}), then the placement."""
    out = [f"# servers.toml of {what} (cluster/recipes/fabric_slice.py; docs/cluster.md)"]
    for name, (ssh, underlay) in servers.items():
        out += [f"[servers.{name}]", f"ssh = {json.dumps(ssh)}", f"ssh_config = {json.dumps(ssh_config)}"]
        out += [f"repo = {json.dumps(repo)}"] if repo else []
        out += [f"[servers.{name}.underlay]", *(f"{p} = {json.dumps(d)}" for p, d in underlay.items()), ""]
    out += [
        "# the nodes of topologies/chicago-ottawa.toml: name another topology's, or drop [placement]",
        "[placement]",
    ]
    out += [f"{node} = {json.dumps(srv)}" for node, srv in PLACEMENT.items()]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    fablib = manager(args.dry_run)
    bastion_config = fablib.get_bastion_ssh_config_file()
    ssh_config = args.ssh_config or os.path.join(os.path.dirname(bastion_config), "udt_ssh_config")
    site = args.site or ("SITE" if args.dry_run else fablib.get_random_site())
    slc = build(fablib, args, site)
    servers: dict[str, tuple[str, dict[str, str]]] = {}
    if args.dry_run:
        print(f"slice {args.name}: site {site}, image {args.image}", file=sys.stderr)
        for n in slc.get_nodes():
            print(f"  node {n.get_name()}: {args.cores} cores, {args.ram} GB RAM, {args.disk} GB disk", file=sys.stderr)
        for net in slc.get_networks():
            names = ", ".join(i.get_name() for i in net.get_interfaces())
            print(f"  {net.get_type()} {net.get_name()}: {names}", file=sys.stderr)
        print(f"would write {ssh_config}:\n{ssh_config_text(fablib)}", file=sys.stderr)
        for n in NODES:
            user = slc.get_node(name=n).get_username()  # the image's default user
            servers[n] = (f"{user}@<{n}'s management IP>", {p: f"<{n}'s NIC on {net}>" for p, net in peers(n).items()})
    else:
        slc.submit()
        jobs = {}
        for n in NODES:
            node = slc.get_node(name=n)
            underlay = {p: node.get_interface(network_name=net).get_device_name() for p, net in peers(n).items()}
            if not all(underlay.values()):
                sys.exit(f"{n}: fablib found no device for an interface: {underlay}")
            up = "".join(f"sudo ip link set dev {d} up && " for d in underlay.values())
            jobs[n] = node.execute_thread(f"{up}{INSTALL} && echo udt-setup-ok")
            servers[n] = (f"{node.get_username()}@{node.get_management_ip()}", underlay)
        for n, job in jobs.items():
            stdout, stderr = job.result()
            if "udt-setup-ok" not in stdout:
                sys.exit(f"{n}: setting up failed:\n{stderr}")
        with open(ssh_config, "w") as f:
            f.write(ssh_config_text(fablib))
    text = servers_toml(servers, ssh_config, args.repo, f"slice {args.name} at {site}")
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
