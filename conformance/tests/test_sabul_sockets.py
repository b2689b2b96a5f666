"""The suite's SABUL peer over real loopback sockets (udtconf.sabul.driver, .cli): byte-exact
files, loss through the test-only drop hook, and the aborts of SABUL.md §5.5 and §10 against
scripted misbehaving peers."""

from __future__ import annotations

import io
import json
import os
import random
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from udtconf import CONFORMANCE_DIR
from udtconf.sabul import driver, peer
from udtconf.sabul.driver import EXIT_BROKEN, EXIT_SETUP, SessionError
from udtconf.sabul.peer import SenderConfig
from udtconf.sabul.wire import Ack, Data, OptionBlock, decode_option_block

PAYLOAD = 1468
QUIET = io.StringIO()


class Serving:
    """``driver.send`` in a thread on an ephemeral port; ``result``/``error`` once it ended."""

    def __init__(self, data: bytes, config: SenderConfig | None = None) -> None:
        self.ready = threading.Event()
        self.address: tuple[str, int] = ("", 0)
        self.result: driver.SendResult | None = None
        self.error: SessionError | None = None
        self._thread = threading.Thread(target=self._run, args=(data, config), daemon=True)
        self._thread.start()
        assert self.ready.wait(5)

    def _listening(self, addr: tuple[str, int]) -> None:
        self.address = addr
        self.ready.set()

    def _run(self, data: bytes, config: SenderConfig | None) -> None:
        try:
            self.result = driver.send(
                ("127.0.0.1", 0), io.BytesIO(data), config, log=QUIET, on_listening=self._listening
            )
        except SessionError as e:
            self.error = e

    def join(self, timeout: float = 30.0) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "sender still running"


def _transfer(data: bytes, config: SenderConfig | None = None) -> tuple[bytes, Serving, driver.RecvResult]:
    s = Serving(data, config)
    sink = io.BytesIO()
    got = driver.receive(s.address, sink, log=QUIET)
    s.join()
    assert s.error is None, s.error
    return sink.getvalue(), s, got


@pytest.mark.parametrize("size", [0, 1, PAYLOAD - 1, PAYLOAD, PAYLOAD + 1])
def test_small_files_arrive_byte_exact(size: int) -> None:
    data = os.urandom(size)
    out, s, r = _transfer(data)
    assert out == data and r.bytes == size
    assert s.result is not None and s.result.bytes == size


@pytest.mark.slow
def test_a_few_megabytes_arrive_byte_exact() -> None:
    data = os.urandom(5 << 20)
    out, s, _ = _transfer(data)
    assert out == data


@pytest.mark.slow
@pytest.mark.parametrize("p", [0.01, 0.05])
def test_random_loss_is_repaired(p: float) -> None:
    rnd = random.Random(7)
    lost: set[int] = set()

    def drop(seq: int, n: int) -> bool:
        if rnd.random() < p:
            lost.add(seq)
            return True
        return False

    data = os.urandom(2 << 20)
    out, s, r = _transfer(data, SenderConfig(drop=drop))
    assert out == data and lost
    assert s.result is not None and s.result.sender.stats.retrans >= len(lost)
    assert r.receiver.stats.naks_sent > 0


def test_cli_moves_a_file_and_writes_the_stats_lines(tmp_path: Path) -> None:
    data = os.urandom(3 * PAYLOAD + 17)
    (tmp_path / "in").write_bytes(data)
    env = dict(os.environ, PYTHONPATH=str(CONFORMANCE_DIR))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cmd = [sys.executable, "-m", "udtconf.sabul"]
    sender = subprocess.Popen(
        [
            *cmd,
            "send",
            "--listen",
            f"127.0.0.1:{port}",
            "--input",
            str(tmp_path / "in"),
            "--stats",
            str(tmp_path / "s"),
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert sender.stderr is not None
    assert sender.stderr.readline().startswith("listening on")
    rc = subprocess.run(
        [
            *cmd,
            "recv",
            "--connect",
            f"127.0.0.1:{port}",
            "--output",
            str(tmp_path / "out"),
            "--stats",
            str(tmp_path / "r"),
        ],
        env=env,
        capture_output=True,
        timeout=30,
    ).returncode
    assert rc == 0 and sender.wait(30) == 0
    assert (tmp_path / "out").read_bytes() == data
    for role, name in (("send", "s"), ("recv", "r")):
        last = json.loads((tmp_path / name).read_text().splitlines()[-1])
        assert last["summary"] and last["role"] == role and last["bytes"] == len(data) and last["stack"] == "sabul-py"
        assert {"mbps", "rtt_ms", "pkts_sent", "pkts_recv", "acks_recv", "naks_sent", "seconds"} <= set(last)


def test_cli_usage_errors_exit_2() -> None:
    run = [sys.executable, "-m", "udtconf.sabul"]
    env = dict(os.environ, PYTHONPATH=str(CONFORMANCE_DIR))
    for args in (
        ["send", "--listen", "nowhere", "--input", "x"],
        ["recv", "--connect", "a:1", "--output", "o", "--mss", "40"],
    ):
        assert subprocess.run([*run, *args], env=env, capture_output=True).returncode == 2


# --- misbehaving peers, scripted ---------------------------------------------------------------


def _rst(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


# A misbehaving sender's script: (control socket, UDP socket, the receiver's data address).
SenderScript = Callable[[socket.socket, socket.socket, tuple[str, int]], None]
# The fake_sender fixture: starts a script, answers the address it listens on.
FakeSender = Callable[[SenderScript], tuple[str, int]]


@pytest.fixture
def fake_sender() -> Iterator[FakeSender]:
    """A listening socket whose accepted connection is handed, after the block/echo exchange, to a
    script (control socket, UDP socket, receiver's data address)."""
    threads: list[threading.Thread] = []

    def start(script: SenderScript) -> tuple[str, int]:
        lsock = socket.socket()
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(1)

        def run() -> None:
            conn, peer_addr = lsock.accept()
            lsock.close()
            block = decode_option_block(conn.recv(40, socket.MSG_WAITALL))
            conn.sendall(block.encode())
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                udp.bind(("127.0.0.1", 0))
                script(conn, udp, (peer_addr[0], block.data_port))

        t = threading.Thread(target=run, daemon=True)
        t.start()
        threads.append(t)
        addr: tuple[str, int] = lsock.getsockname()  # typeshed: Any (the form depends on the family)
        return addr

    yield start
    for t in threads:
        t.join(10)


def _wait_for_ack(conn: socket.socket, ack_no: int) -> None:
    conn.settimeout(5)
    buf = b""
    while Ack(ack_no).encode() not in buf:
        buf += conn.recv(4096)


def test_receiver_treats_a_reset_before_eof_as_an_abort_and_keeps_what_arrived(fake_sender: FakeSender) -> None:
    def script(conn: socket.socket, udp: socket.socket, dest: tuple[str, int]) -> None:
        for seq, chunk in enumerate((b"first", b"second", b"third")):
            udp.sendto(Data(seq, chunk).encode(), dest)
        _wait_for_ack(conn, 3)  # everything arrived …
        _rst(conn)  # … but a reset is not the end of the stream (§10.2)

    sink = io.BytesIO()
    with pytest.raises(SessionError, match="reset the control connection before its end") as e:
        driver.receive(fake_sender(script), sink, log=QUIET)
    assert e.value.code == EXIT_BROKEN
    assert sink.getvalue() == b"firstsecondthird"


def test_receiver_ignores_data_from_a_foreign_address(fake_sender: FakeSender) -> None:
    def script(conn: socket.socket, udp: socket.socket, dest: tuple[str, int]) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as other:
            other.bind(("127.0.0.2", 0))
            other.sendto(Data(0, b"forged").encode(), dest)
        udp.sendto(Data(0, b"real").encode(), dest)
        _wait_for_ack(conn, 1)
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(5)
        while conn.recv(4096):
            pass
        conn.close()

    sink = io.BytesIO()
    r = driver.receive(fake_sender(script), sink, log=QUIET)
    assert sink.getvalue() == b"real" and r.receiver.stats.pkts_recv == 1


def test_receiver_reports_the_hole_a_premature_fin_leaves(fake_sender: FakeSender) -> None:
    def script(conn: socket.socket, udp: socket.socket, dest: tuple[str, int]) -> None:
        udp.sendto(Data(0, b"a").encode(), dest)
        udp.sendto(Data(2, b"c").encode(), dest)
        _wait_for_ack(conn, 1)
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(5)
        with pytest.raises(ConnectionResetError):  # the receiver aborts: an error, not an end (§10.1)
            while conn.recv(4096):
                pass

    sink = io.BytesIO()
    with pytest.raises(SessionError, match="missing from sequence number 1") as e:
        driver.receive(fake_sender(script), sink, log=QUIET)
    assert e.value.code == EXIT_BROKEN and sink.getvalue() == b"a"


def _fake_receiver(address: tuple[str, int], block: bytes) -> socket.socket:
    sock = socket.create_connection(address, timeout=5)
    sock.sendall(block)
    return sock


def test_sender_resets_a_receiver_with_a_bogus_option_block() -> None:
    s = Serving(b"data")
    sock = _fake_receiver(s.address, OptionBlock(7001, max_loss_length=9999).encode())
    with pytest.raises(ConnectionResetError):
        sock.recv(40)  # no echo: a reset (§2 step 4, §10.2)
    s.join()
    assert s.error is not None and s.error.code == EXIT_SETUP and "max_loss_length 9999" in str(s.error)


def test_sender_aborts_on_an_err_claiming_a_billion_words() -> None:
    s = Serving(os.urandom(50 * PAYLOAD), SenderConfig(interval_us=2000.0))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.bind(("127.0.0.1", 0))
        sock = _fake_receiver(s.address, OptionBlock(udp.getsockname()[1]).encode())
        assert len(sock.recv(40, socket.MSG_WAITALL)) == 40
        udp.recv(2000)
        sock.sendall(struct.pack("!II", 2, 1_000_000_000))
        s.join()
    assert s.error is not None and s.error.code == EXIT_BROKEN and "claims 1000000000" in str(s.error)
    with pytest.raises(ConnectionResetError):
        sock.recv(1)


def test_sender_gives_up_on_a_receiver_that_vanished(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peer, "EXP_INTERVAL", 0.05)
    s = Serving(os.urandom(50 * PAYLOAD), SenderConfig(slow_start=False))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.bind(("127.0.0.1", 0))
        sock = _fake_receiver(s.address, OptionBlock(udp.getsockname()[1]).encode())
        s.join(10)  # it never ACKs: EXP re-sends ten times, then the sender aborts (§5.5)
        sock.close()
    assert s.error is not None and s.error.code == EXIT_BROKEN and "receiver silent" in str(s.error)
