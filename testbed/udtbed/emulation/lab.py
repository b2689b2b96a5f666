"""A lab of "servers" on this machine, for trying a cluster run (and for its tests).

Each server is a network namespace of its own with a mount namespace (its own ``/run/netns``:
the namespaces a run makes there are that server's alone), a PID namespace (its processes are
its own, and all end with it) and Debian's ``sshd`` on a private address, which the head reaches
through a management veth. Servers are joined pairwise by veth pairs that stand for their
physical links, named ``eth-<other server>`` on each side: the underlay a servers file names.
:meth:`Lab.up` writes a key pair, an ``ssh_config`` and the ``servers.toml`` a run takes.

The lab's names start with ``udtlab-`` (never ``udtb-``, which the testbed's cleanup sweeps).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "udtlab-"
SSHD = Path("/usr/sbin/sshd")
DEFAULT_NAMES = ("sender", "delay", "receiver")


class LabError(RuntimeError):
    """The lab cannot be set up here; the message says what to do."""


def _sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if check and p.returncode != 0:
        raise LabError(f"`{' '.join(argv)}` failed ({p.returncode}): {p.stderr.strip()}")
    return p


@dataclass
class Lab:
    """``names`` servers in ``workdir`` (keys, configs, logs); ``mtu`` of the underlay links."""

    workdir: Path
    names: tuple[str, ...] = DEFAULT_NAMES
    mtu: int = 1500
    tag: str = field(default_factory=lambda: str(os.getpid()))
    pids: dict[str, int] = field(default_factory=dict)  # server -> its `unshare` (outside its PID namespace)

    def ns(self, name: str) -> str:
        return f"{PREFIX}{self.tag}-{name}"

    def address(self, i: int) -> tuple[str, str]:
        """(head's, server's) management address of server ``i``."""
        return f"10.249.{i}.1", f"10.249.{i}.2"

    @property
    def servers_file(self) -> Path:
        return self.workdir / "servers.toml"

    def __enter__(self) -> Lab:
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def up(self) -> Path:
        """Start the servers; returns the servers file."""
        if not SSHD.exists():
            raise LabError(f"{SSHD} is missing: run `make setup` (it installs openssh-server)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        key = self.workdir / "id"
        if not key.exists():
            _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
            _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.workdir / "hostkey"))
        shutil.copy(self.workdir / "id.pub", self.workdir / "authorized_keys")
        (self.workdir / "ssh_config").write_text(
            f"Host *\n  IdentityFile {key}\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
            "  LogLevel ERROR\n  User root\n"
        )
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        for i, name in enumerate(self.names):
            ns = self.ns(name)
            _sh("ip", "netns", "add", ns)
            head, srv = self.address(i)
            mgmt = f"{PREFIX}{self.tag}{i}"[:15]
            _sh("ip", "link", "add", mgmt, "type", "veth", "peer", "name", "mgmt", "netns", ns)
            _sh("ip", "addr", "add", f"{head}/30", "dev", mgmt)
            _sh("ip", "link", "set", mgmt, "up")
            _sh("ip", "-n", ns, "addr", "add", f"{srv}/30", "dev", "mgmt")
            _sh("ip", "-n", ns, "link", "set", "mgmt", "up")
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
        for i, a in enumerate(self.names):
            for b in self.names[i + 1 :]:
                _sh("ip", "link", "add", f"eth-{b}"[:15], "netns", self.ns(a), "type", "veth", "peer", "name",
                    f"eth-{a}"[:15], "netns", self.ns(b))  # fmt: skip
                for ns, ifn in ((self.ns(a), f"eth-{b}"[:15]), (self.ns(b), f"eth-{a}"[:15])):
                    _sh("ip", "-n", ns, "link", "set", ifn, "mtu", str(self.mtu), "up")
        for i, name in enumerate(self.names):
            self._start_sshd(i, name)
        self._write_servers()
        self._save()
        return self.servers_file

    def _start_sshd(self, i: int, name: str) -> None:
        cfg = self.workdir / f"sshd-{name}.conf"
        cfg.write_text(
            f"ListenAddress {self.address(i)[1]}\nHostKey {self.workdir / 'hostkey'}\n"
            f"AuthorizedKeysFile {self.workdir / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
            f"PidFile {self.workdir / f'sshd-{name}.pid'}\nUseDNS no\nMaxSessions 200\nMaxStartups 200\n"
        )
        # PID 1 of the server's PID namespace is a shell that waits on sshd; `unshare` sends it
        # SIGKILL when it ends itself, and everything in the namespace ends with it.
        init = f"mount -t tmpfs udtlab /run/netns && {SSHD} -D -f {cfg} -E {self.workdir / f'sshd-{name}.log'} & wait"
        p = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                self.ns(name),
                "unshare",
                "--mount",
                "--pid",
                "--fork",
                "--mount-proc",
                "--propagation",
                "private",
                "--kill-child=SIGKILL",
                "sh",
                "-c",
                init,
            ],  # fmt: skip
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.workdir / f"server-{name}.log", "wb"),  # noqa: SIM115 - the child keeps it
            start_new_session=True,
        )
        self.pids[name] = p.pid
        head, srv = self.address(i)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            ok = _sh("ssh", "-F", str(self.workdir / "ssh_config"), "-o", "BatchMode=yes", "-o", "ConnectTimeout=2",
                     f"root@{srv}", "true", check=False)  # fmt: skip
            if ok.returncode == 0:
                return
            if p.poll() is not None:
                break
            time.sleep(0.2)
        log = (
            (self.workdir / f"sshd-{name}.log").read_text(errors="replace")
            if (self.workdir / f"sshd-{name}.log").exists()
            else ""
        )
        raise LabError(f"lab server {name}: sshd did not answer on {srv} in 10 s: {log.strip()[-500:] or 'no log'}")

    def _write_servers(self) -> None:
        lines = [f"# The lab's servers (udtbed lab up, {self.workdir}); docs/cluster.md"]
        for i, name in enumerate(self.names):
            lines += [
                "",
                f"[servers.{name}]",
                f'ssh = "root@{self.address(i)[1]}"',
                f'ssh_config = "{self.workdir / "ssh_config"}"',
                f"[servers.{name}.underlay]",
            ]
            lines += [f'{other} = "eth-{other}"' for other in self.names if other != name]
        self.servers_file.write_text("\n".join(lines) + "\n")

    def _save(self) -> None:
        (self.workdir / "lab.json").write_text(
            json.dumps({"tag": self.tag, "names": list(self.names), "pids": self.pids, "mtu": self.mtu})
        )

    @classmethod
    def load(cls, workdir: Path) -> Lab:
        """The lab whose files are in ``workdir`` (``udtbed lab down``)."""
        try:
            d = json.loads((workdir / "lab.json").read_text())
        except (OSError, ValueError) as e:
            raise LabError(f"{workdir} holds no lab (lab.json: {e})") from None
        return cls(workdir, tuple(d["names"]), d["mtu"], d["tag"], {k: int(v) for k, v in d["pids"].items()})

    def set_mtu(self, mtu: int) -> None:
        """Every underlay link's MTU (the refusal of a too-small underlay is tested with it)."""
        for a in self.names:
            for b in self.names:
                if b != a:
                    _sh("ip", "-n", self.ns(a), "link", "set", f"eth-{b}"[:15], "mtu", str(mtu))
        self.mtu = mtu

    def down(self) -> None:
        """Stop every server (its PID namespace, with whatever runs there) and remove its namespace."""
        for pid in self.pids.values():
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            for _ in range(50):
                try:
                    os.kill(pid, 0)
                    waited = os.waitpid(pid, os.WNOHANG)
                    if waited[0]:
                        break
                except ChildProcessError:
                    if not Path(f"/proc/{pid}").exists():
                        break
                except ProcessLookupError:
                    break
                time.sleep(0.05)
            else:
                os.killpg(pid, signal.SIGKILL)
        self.pids.clear()
        for i, name in enumerate(self.names):
            _sh("ip", "link", "del", f"{PREFIX}{self.tag}{i}"[:15], check=False)  # and its peer, mgmt
            _sh("ip", "netns", "del", self.ns(name), check=False)


def leftovers(lab: Lab) -> dict[str, list[str]]:
    """What a run left on each lab server: its ``udtb-`` namespaces, and processes other than sshd
    and the server's init (the sessions of the query itself aside)."""
    out: dict[str, list[str]] = {}
    for i, name in enumerate(lab.names):
        p = _sh("ssh", "-F", str(lab.workdir / "ssh_config"), "-o", "BatchMode=yes", f"root@{lab.address(i)[1]}",
                "ip netns list; echo ---; ps -eo pid=,ppid=,comm=,args=", check=False)  # fmt: skip
        nss, _, ps = p.stdout.partition("---")
        left = [line.split()[0] for line in nss.splitlines() if line.startswith("udtb-")]
        me = {"ps", "sh", "bash", "sshd", "sshd-session", "unshare"}
        left += [line.strip() for line in ps.splitlines() if line.split()[2:3] and line.split()[2] not in me]
        if left:
            out[name] = left
    return out
