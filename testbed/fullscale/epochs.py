"""Loss epochs read from a part's captures at both ends (issue 31; plan-16-epochs.txt).

    python3 testbed/fullscale/epochs.py RESULTS_DIR OUT.json [--src chicago] [--dst amsterdam]
                                        [--slices DIR]

For every captured run of a one-flow UDT part under RESULTS_DIR (the runner's
``<tag>-<host>-<iface>.pcap`` files, written by ``capture = true``; tag ``<stack>-bulk``), this
pairs the sender's capture (host ``--src``) with the receiver's (``--dst``) and says:

- per 10 ms of the sender's time: DATA packets sent for the first time and again, those of them
  the receiver never got the first time, the mean one-way delay of those it got (both captures are
  on one host's clock, so the delay above the path's smallest is the bottleneck queue's), and the
  NAKs the sender received; per 10 ms of the receiver's time: DATA arrivals and NAKs sent;
- per loss epoch (losses less than a second apart at the receiver): when the first packet lost was
  sent, the sender's rate over the 10 ms to 2 s before it against the link's (the receiver's
  arrival rate over the second before, a full queue's drain rate), the queue's delay then, how many
  packets were lost in how many runs, and how many NAK packets (and loss-list words) the receiver
  sent and the sender received for them;
- what tcpdump itself dropped (its log's "dropped by kernel").

UDT4.md §3 (a DATA packet's first word is its sequence number, top bit 0; a control packet's top
bit is 1, its type in bits 16-30: 2 ACK, 3 NAK, 6 ACK2) and §6.4 (a NAK's loss list: a word with
the top bit set starts a range that the next word ends). The captures are the testbed's: Ethernet
(veth), IPv4, 96 bytes of each frame, nanosecond stamps; a NAK's list is counted in words from the
UDP length, since only its first words are captured. With ``--slices`` the 250 ms around each
run's second epoch (the first after slow start) are written out of both captures as pcaps, each
around the moment its end met the epoch (the sender's first lost packet, the receiver's first gap).

Only the standard library: it runs with the full-scale bundle's Python on the lent host, where the
captures are, so that only this summary needs to come back.
"""

from __future__ import annotations

import argparse
import bisect
import json
import re
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BIN_S = 0.010
EPOCH_GAP_S = 1.0
RATE_WINDOWS_S = (0.01, 0.05, 0.1, 0.5, 2.0)
SEQ_MOD = 1 << 31
NAK, ACK, ACK2 = 3, 2, 6
MAGICS = {b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\x4d\x3c\xb2\xa1": ("<", 1e-9)}


def frames(path: Path) -> Iterator[tuple[float, int, int, bytes, int]]:
    """(time, record offset, record length, UDP payload as captured, UDP payload length) of each
    IPv4 UDP frame of an Ethernet pcap. Not the harness's reader (udtharness.pcap): a slice needs
    each record's offset, a NAK's length the UDP length beyond the snaplen, and millions of frames
    a run want no object per frame."""
    data = path.read_bytes()
    if data[:4] not in MAGICS:
        raise SystemExit(f"epochs: {path} is not a pcap this script reads (magic {data[:4].hex()})")
    endian, unit = MAGICS[data[:4]]
    if struct.unpack_from(endian + "I", data, 20)[0] & 0x0FFFFFFF != 1:
        raise SystemExit(f"epochs: {path} is not an Ethernet capture")
    rec = struct.Struct(endian + "IIII")
    off, end = 24, len(data)
    while off + 16 <= end:
        sec, frac, incl, _orig = rec.unpack_from(data, off)
        body = off + 16
        if body + incl > end:
            return
        frame = data[body : body + incl]
        if incl >= 42 and frame[12:14] == b"\x08\x00" and frame[23] == 17:
            ihl = (frame[14] & 0x0F) * 4
            udp = 14 + ihl
            ulen = struct.unpack_from("!H", frame, udp + 4)[0] - 8
            yield sec + frac * unit, off, 16 + incl, frame[udp + 8 :], ulen
        off = body + incl


class Unwrap:
    """31-bit sequence numbers as integers that keep growing (UDT4.md §3: they wrap at 2^31)."""

    def __init__(self) -> None:
        self.last: int | None = None

    def __call__(self, seq: int) -> int:
        if self.last is None:
            self.last = seq
            return seq
        d = (seq - self.last) % SEQ_MOD
        if d >= SEQ_MOD // 2:
            d -= SEQ_MOD
        v = self.last + d
        self.last = max(self.last, v)
        return v


def read_end(path: Path) -> dict[str, Any]:
    """One end's capture: its DATA (time, sequence) in file order and its NAKs (time, words,
    direction)."""
    unwrap = Unwrap()
    data_t: list[float] = []
    data_s: list[int] = []
    naks: list[tuple[float, int]] = []  # time, loss-list words
    acks = 0
    for t, _off, _n, payload, ulen in frames(path):
        if len(payload) < 4:
            continue
        w0 = struct.unpack_from("!I", payload)[0]
        if not w0 >> 31:
            data_t.append(t)
            data_s.append(unwrap(w0))
            continue
        kind = (w0 >> 16) & 0x7FFF
        if kind == NAK:
            naks.append((t, max(0, (ulen - 16) // 4)))
        elif kind == ACK:
            acks += 1
    return {"data_t": data_t, "data_s": data_s, "naks": naks, "acks": acks}


def tcpdump_dropped(pcap: Path) -> int | None:
    log = pcap.with_suffix(".tcpdump.log")
    if not log.exists():
        return None
    m = re.search(r"(\d+) packets? dropped by kernel", log.read_text(errors="replace"))
    return int(m.group(1)) if m else None


def analyse(send_pcap: Path, recv_pcap: Path) -> dict[str, Any]:
    s, r = read_end(send_pcap), read_end(recv_pcap)
    if not s["data_s"] or not r["data_s"]:
        return {"error": "no DATA in one of the captures"}
    base = min(s["data_s"])
    n = max(s["data_s"]) - base + 1
    first_send = [float("nan")] * n
    sends = [0] * n
    for t, q in zip(s["data_t"], s["data_s"], strict=True):
        i = q - base
        if sends[i] == 0:
            first_send[i] = t
        sends[i] += 1
    first_recv: list[float | None] = [None] * n
    # The receiver's losses: a sequence number past the next expected leaves a run missing.
    runs: list[tuple[float, int, int]] = []  # detected at, first missing (index), length
    expected = None
    for t, q in zip(r["data_t"], r["data_s"], strict=True):
        i = q - base
        if not 0 <= i < n:
            continue
        if first_recv[i] is None:
            first_recv[i] = t
        if expected is None:
            expected = i + 1
        elif i >= expected:
            if i > expected:
                runs.append((t, expected, i - expected))
            expected = i + 1
    t0 = s["data_t"][0]
    # The path's one-way delay without a queue: the smallest delay of a packet sent once.
    owd = [fr - fs for fr, fs, k in zip(first_recv, first_send, sends, strict=True) if fr is not None and k == 1]
    base_owd = min(owd) if owd else 0.0
    never_first = {i for _t, a, k in runs for i in range(a, a + k)}

    nbins = int((max(s["data_t"][-1], r["data_t"][-1]) - t0) / BIN_S) + 1
    sent_new, sent_again, lost_first, owd_sum, owd_n = [0] * nbins, [0] * nbins, [0] * nbins, [0.0] * nbins, [0] * nbins
    for t, q in zip(s["data_t"], s["data_s"], strict=True):
        i, b = q - base, int((t - t0) / BIN_S)
        if t != first_send[i]:  # the same packet again
            sent_again[b] += 1
            continue
        sent_new[b] += 1
        if i in never_first:
            lost_first[b] += 1
        elif (fr := first_recv[i]) is not None:
            owd_sum[b] += fr - t - base_owd
            owd_n[b] += 1
    arrivals, naks_sent, naks_recv = [0] * nbins, [0] * nbins, [0] * nbins
    for t in r["data_t"]:
        arrivals[min(nbins - 1, int((t - t0) / BIN_S))] += 1
    for t, _w in r["naks"]:
        naks_sent[min(nbins - 1, int((t - t0) / BIN_S))] += 1
    for t, _w in s["naks"]:
        naks_recv[min(nbins - 1, int((t - t0) / BIN_S))] += 1
    queue_ms = [round(owd_sum[b] / owd_n[b] * 1e3, 2) if owd_n[b] else None for b in range(nbins)]

    # Loss epochs: runs of losses less than EPOCH_GAP_S apart at the receiver.
    epochs: list[list[tuple[float, int, int]]] = []
    for run in runs:
        if epochs and run[0] - epochs[-1][-1][0] < EPOCH_GAP_S:
            epochs[-1].append(run)
        else:
            epochs.append([run])
    s_times = s["data_t"]
    r_times = r["data_t"]
    out_epochs = []
    for k, ep in enumerate(epochs):
        t_detect, first_missing, _len = ep[0]
        t_lost_sent = first_send[first_missing]
        t_end = ep[-1][0]
        # The link's rate: the receiver's arrivals over the second before the first loss showed.
        lo = bisect.bisect_left(r_times, t_detect - 1.0)
        hi = bisect.bisect_left(r_times, t_detect)
        link_pps = (hi - lo) / 1.0
        over = {}
        for w in RATE_WINDOWS_S:
            a = bisect.bisect_left(s_times, t_lost_sent - w)
            b = bisect.bisect_left(s_times, t_lost_sent)
            over[f"{int(w * 1000)}ms"] = round((b - a) / w / link_pps, 4) if link_pps else None
        qb = int((t_lost_sent - t0) / BIN_S)
        naks_r = [x for x in r["naks"] if t_detect <= x[0] <= t_end + 0.5]
        naks_s = [x for x in s["naks"] if t_detect <= x[0] <= t_end + 0.6]
        lost = sum(x[2] for x in ep)
        out_epochs.append(
            {
                "epoch": k,
                "first_lost_sent_s": round(t_lost_sent - t0, 4),
                "first_loss_seen_s": round(t_detect - t0, 4),
                "last_loss_seen_s": round(t_end - t0, 4),
                "lost": lost,
                "runs": len(ep),
                "run_lengths": _hist([x[2] for x in ep]),
                "link_pps": link_pps,
                "sent_over_link": over,
                "queue_ms_before": [queue_ms[b] for b in range(max(0, qb - 20), qb + 1)],
                "naks_sent": len(naks_r),
                "nak_words_sent": sum(x[1] for x in naks_r),
                "naks_received": len(naks_s),
                "naks_per_lost": round(len(naks_r) / lost, 3) if lost else None,
            }
        )
    return {
        "sender_capture": send_pcap.name,
        "receiver_capture": recv_pcap.name,
        "tcpdump_dropped": {"sender": tcpdump_dropped(send_pcap), "receiver": tcpdump_dropped(recv_pcap)},
        "seconds": round(s_times[-1] - t0, 3),
        "packets": n,
        "sent": len(s_times),
        "sent_again": len(s_times) - sum(1 for k in sends if k),
        "lost_first_time": len(never_first),
        "received": len(r_times),
        "naks_sent": len(r["naks"]),
        "naks_received": len(s["naks"]),
        "acks_at_sender": s["acks"],
        "base_owd_ms": round(base_owd * 1e3, 3),
        "epochs": out_epochs,
        "bins": {
            "bin_s": BIN_S,
            "sent_new": sent_new,
            "sent_again": sent_again,
            "lost_first": lost_first,
            "queue_ms": queue_ms,
            "arrivals": arrivals,
            "naks_sent": naks_sent,
            "naks_received": naks_recv,
        },
        "_t0": t0,
        # The second epoch (the first after slow start): when its first lost packet was sent, and
        # when the receiver saw it missing.
        "_second_epoch": (out_epochs[1]["first_lost_sent_s"], out_epochs[1]["first_loss_seen_s"])
        if len(out_epochs) > 1
        else None,
    }


def _hist(xs: list[int]) -> dict[str, int]:
    h: dict[str, int] = {}
    for x in xs:
        key = str(x) if x < 5 else "5-19" if x < 20 else "20+"
        h[key] = h.get(key, 0) + 1
    return h


def write_slice(src: Path, dst: Path, t_from: float, t_to: float) -> None:
    data = src.read_bytes()
    out = bytearray(data[:24])
    for t, off, length, *_ in frames(src):
        if t_from <= t <= t_to:
            out += data[off : off + length]
        elif t > t_to:
            break
    dst.write_bytes(bytes(out))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results")
    ap.add_argument("out")
    ap.add_argument("--src", default="chicago")
    ap.add_argument("--dst", default="amsterdam")
    ap.add_argument("--slices", help="write the 250 ms around each run's second epoch here")
    a = ap.parse_args(argv)
    runs = []
    for send in sorted(Path(a.results).rglob(f"*-bulk-{a.src}-*.pcap")):
        recv = list(send.parent.glob(send.name.split(f"-{a.src}-")[0] + f"-{a.dst}-*.pcap"))
        if len(recv) != 1:
            print(f"epochs: {send}: no one receiver capture beside it ({len(recv)})", file=sys.stderr)
            continue
        res = analyse(send, recv[0])
        res["where"] = str(send.parent.relative_to(a.results))
        if a.slices and res.get("_second_epoch") is not None:
            sent_at, seen_at = (res["_t0"] + x for x in res["_second_epoch"])
            Path(a.slices).mkdir(parents=True, exist_ok=True)
            stem = re.sub(r"[^A-Za-z0-9._-]", "_", f"{res['where']}-{send.name.split('-bulk')[0]}")
            # Each end's slice around its own moment of the epoch: the receiver sees a loss a
            # one-way delay (and the queue) after the sender sent the packet.
            for which, p, at in (("send", send, sent_at), ("recv", recv[0], seen_at)):
                write_slice(p, Path(a.slices) / f"{stem}-{which}.pcap", at - 0.15, at + 0.1)
        res.pop("_t0", None)
        res.pop("_second_epoch", None)
        runs.append(res)
        eps = res.get("epochs", [])
        print(
            f"epochs: {res['where']} {send.name}: {res.get('sent')} sent, {res.get('lost_first_time')} lost, "
            f"{len(eps)} epochs, NAKs {res.get('naks_sent')} sent / {res.get('naks_received')} received, "
            f"tcpdump dropped {res.get('tcpdump_dropped')}"
        )
        for e in eps:
            print(
                f"   at {e['first_lost_sent_s']:7.3f} s: {e['lost']:5d} lost in {e['runs']:4d} runs, "
                f"{e['naks_sent']:5d} NAKs; sent/link {e['sent_over_link']}"
            )
    Path(a.out).write_text(json.dumps({"runs": runs}, indent=1))
    return 0 if runs else 1


if __name__ == "__main__":
    raise SystemExit(main())
