"""Interop tests: our `udt` against libudt 4.11, with libudt against itself as the control.

Each case is one file transfer, sender -> receiver, over the loopback or across a
veth pair between two network namespaces, as client/listener or rendezvous, in
STREAM or DGRAM mode. Sizes around one payload (MSS 1500 -> 1456 bytes) catch
off-by-one packetisation; 1 GiB exercises flow and congestion control.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import check_transfer, transfer
from udtharness.netns import Net
from udtharness.testdata import random_file

# (sender, receiver): the sender is the client (or the rendezvous side that runs `send`).
PAIRS = [
    pytest.param(("udt-rs", "libudt"), id="udt_to_libudt"),
    pytest.param(("libudt", "udt-rs"), id="libudt_to_udt"),
    pytest.param(("libudt", "libudt"), id="libudt_to_libudt"),
]
NETS = [pytest.param("lo", id="lo"), pytest.param("veth", id="veth", marks=pytest.mark.needs_root)]
SMALL_SIZES = [0, 1, 1455, 1456, 1457]
GIB = 1 << 30


@pytest.fixture(scope="session")
def small_files(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    d = tmp_path_factory.mktemp("inputs")
    return {n: random_file(d / f"in-{n}", n) for n in SMALL_SIZES}


@pytest.fixture(scope="session")
def gib_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = random_file(tmp_path_factory.mktemp("gib") / "in-1GiB", GIB)
    yield path
    path.unlink(missing_ok=True)  # pytest keeps the last runs' tmp dirs: do not leave 1 GiB in each


@pytest.mark.parametrize("size", SMALL_SIZES)
@pytest.mark.parametrize("sock", ["stream", "dgram"])
@pytest.mark.parametrize("conn", ["listen", "rendezvous"])
@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("net", NETS, indirect=True)
def test_transfer(
    net: Net, pair: tuple[str, str], conn: str, sock: str, size: int, small_files: dict[int, Path], tmp_path: Path
) -> None:
    sender, receiver = pair
    src, dst = small_files[size], tmp_path / "out"
    result = transfer(
        sender=sender,
        receiver=receiver,
        net=net,
        input_path=src,
        output_path=dst,
        workdir=tmp_path,
        rendezvous=conn == "rendezvous",
        dgram=sock == "dgram",
    )
    check_transfer(result, src, dst, size)


@pytest.mark.slow
@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("net", NETS, indirect=True)
def test_one_gib_stream(net: Net, pair: tuple[str, str], gib_file: Path, tmp_path: Path) -> None:
    sender, receiver = pair
    dst = tmp_path / "out"
    try:
        result = transfer(
            sender=sender,
            receiver=receiver,
            net=net,
            input_path=gib_file,
            output_path=dst,
            workdir=tmp_path,
            timeout=120,
        )
        check_transfer(result, gib_file, dst, GIB)
        s = result.summary("recv")
        print(f"{net.name} {sender}->{receiver}: 1 GiB in {s['seconds']:.2f} s, {s['mbps']:.0f} Mb/s")
    finally:
        dst.unlink(missing_ok=True)  # 1 GiB per case: do not keep it in the pytest tmp dir
