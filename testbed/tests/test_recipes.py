"""The lab recipes (cluster/recipes/): the CloudLab profile's RSpec and its --servers blocks, and
the FABRIC script's --dry-run servers.toml. Neither testbed is contacted; each library is optional."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "cluster" / "recipes" / "cloudlab_profile.py"
FABRIC = REPO / "cluster" / "recipes" / "fabric_slice.py"
ADDRESSES = {"10.10.1.1", "10.10.1.2", "10.10.2.1", "10.10.2.2"}


def run(
    argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, env=env, cwd=cwd, stdin=subprocess.DEVNULL, timeout=60
    )


def with_ip(bin_dir: Path, script: str) -> dict[str, str]:
    """The environment with ``ip`` on PATH a shell script of ours."""
    bin_dir.mkdir()
    (bin_dir / "ip").write_text(f"#!/bin/sh\n{script}\n")
    (bin_dir / "ip").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def test_the_cloudlab_profile_requests_three_nodes_and_two_unshaped_links(tmp_path: Path) -> None:
    pytest.importorskip("geni.portal", reason="geni-lib (CloudLab's profile library) is not installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENILIB_")}  # standalone: the RSpec on stdout
    p = run([str(PROFILE)], env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    root = ET.fromstring(p.stdout)
    nodes = [e for e in root if local(e.tag) == "node"]
    links = [e for e in root if local(e.tag) == "link"]
    assert [n.get("client_id") for n in nodes] == ["sender", "delay", "receiver"]
    assert len(links) == 2
    for n in nodes:
        assert n.get("exclusive") == "true"  # bare metal
        image = [e for e in n.iter() if local(e.tag) == "disk_image"]
        assert image and "UBUNTU24" in (image[0].get("name") or "")
        commands = [e.get("command") or "" for e in n.iter() if local(e.tag) == "execute"]
        assert len(commands) == 1 and all(pkg in commands[0] for pkg in ("iproute2", "ethtool", "mininet", "tcpdump"))
    ips = {e.get("address") for e in root.iter() if local(e.tag) == "ip"}
    assert ips == ADDRESSES
    ends = {
        link.get("client_id"): {e.get("client_id") for e in link if local(e.tag) == "interface_ref"} for link in links
    }
    assert ends == {
        "sender-delay": {"sender:to-delay", "delay:to-sender"},
        "delay-receiver": {"delay:to-receiver", "receiver:to-delay"},
    }
    for link in links:
        assert any(local(e.tag) == "best_effort" and e.get("enabled") == "true" for e in link)
        assert {e.get("capacity") for e in link if local(e.tag) == "property"} == {"10000000"}


def test_each_cloudlab_node_prints_its_servers_block_with_the_interfaces_holding_its_addresses(tmp_path: Path) -> None:
    # A stand-in for `ip -o -4 addr show to ADDRESS` on the allocated nodes: 10.10.X.Y is on ethXY.
    env = with_ip(
        tmp_path / "up",
        'for a; do :; done\nd=$(echo "$a" | cut -d. -f3,4 | tr -d .)\n'
        'echo "3: eth$d    inet $a/24 brd 10.10.1.255 scope global eth$d\\       valid_lft forever"',
    )
    blocks = []
    for name in ("sender", "delay", "receiver"):
        p = run([str(PROFILE), "--servers", name], env=env)
        assert p.returncode == 0, p.stderr
        blocks.append(p.stdout)
    servers = tomllib.loads("".join(blocks))["servers"]
    assert list(servers) == ["sender", "delay", "receiver"]
    assert servers["sender"]["underlay"] == {"delay": "eth11"}
    assert servers["delay"]["underlay"] == {"sender": "eth12", "receiver": "eth21"}
    assert servers["receiver"]["underlay"] == {"delay": "eth22"}
    for s in servers.values():
        assert "@" in s["ssh"] and s["repo"] == str(REPO)
    # A node that is not the profile's, or one whose link is not up, says so and fails.
    assert run([str(PROFILE), "--servers", "head"], env=env).returncode != 0
    down = run([str(PROFILE), "--servers", "sender"], env=with_ip(tmp_path / "down", "true"))
    assert down.returncode != 0 and "no interface here has 10.10.1.1" in down.stderr


def test_the_fabric_dry_run_prints_a_servers_file_without_contacting_fabric(tmp_path: Path) -> None:
    pytest.importorskip("fabrictestbed_extensions", reason="fablib (fabrictestbed-extensions) is not installed")
    # No fablib configuration (a fresh HOME, no FABRIC_* variables): the dry run needs none.
    env = {k: v for k, v in os.environ.items() if not k.startswith("FABRIC_")} | {"HOME": str(tmp_path)}
    p = run([str(FABRIC), "--dry-run", "--site", "STAR", "--repo", "/proj/udt/udt-testbed"], env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    data = tomllib.loads(p.stdout)
    servers = data["servers"]
    assert list(servers) == ["sender", "delay", "receiver"]
    assert {peer for s in servers.values() for peer in s["underlay"]} <= set(servers)
    assert set(servers["delay"]["underlay"]) == {"sender", "receiver"}
    assert set(servers["sender"]["underlay"]) == set(servers["receiver"]["underlay"]) == {"delay"}
    for s in servers.values():
        assert s["ssh"].startswith("ubuntu@") and s["repo"] == "/proj/udt/udt-testbed"
        assert s["ssh_config"] == str(tmp_path / "work" / "fabric_config" / "udt_ssh_config")
    assert set(data["placement"].values()) == set(servers)
    # The request was built by fablib: its networks and their interfaces.
    assert "sender-delay: sender-to-delay-p1, delay-to-sender-p1" in p.stderr
    assert "delay-receiver: " in p.stderr and "site STAR" in p.stderr
    assert not (tmp_path / "work" / "fabric_config" / "udt_ssh_config").exists()  # a dry run writes nothing
