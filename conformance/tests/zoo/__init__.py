"""The zoo: stacks that misbehave on purpose, one known defect each, for the suite's own
conformance test (test_zoo.py, issue 27).

Every zoo stack is the same small UDT4 endpoint (:mod:`zoo.peer`, written from UDT4.md on the
suite's Python peer) behind the adapter contract — a meta.toml and an entrypoint that runs
``peer.py DEFECT`` — with one defect switched on. It is run against both reference stacks
(libudt and udt-rs) in the role where its defect lives, in the case that shows it. The expected
verdict of a cell is the default gate's (``must``): ``fail`` when the interop run or a MUST wire
rule fails, ``reported`` when only a SHOULD rule does, ``pass`` otherwise. The culprit of every
row is the zoo stack; "shows" is what the suite must say (in the one-line reason) or find (a
wire rule naming the zoo stack).

=================  ===========================================  ========  ======  ========  ===================
defect             what the stack does                          case      role    verdict   shows
=================  ===========================================  ========  ======  ========  ===================
healthy            nothing wrong: the control                   hs, tr,   both    pass      –
                                                                loss
no-ack             the receiver never sends an ACK (§8.3)       hs        server  fail      "sent no ACK"
no-ack2            the sender never answers an ACK with an      tr        client  reported  rule 8.6 ack2-for-
                   ACK2 (§8.6, a SHOULD)                                                    every-ack
no-retransmit      the sender ignores NAKs and its own EXP      loss      client  fail      "never
                   timer (§8.7, §9.4)                                                       retransmitted"
wrong-isn          the first data packet carries ISN + 1, not   hs        client  fail      rule 4 first-data-
                   its handshake's ISN (§4)                                                 is-isn
oversize-payload   payloads of the full MSS, 1500 bytes,        tr        client  fail      rule 3.1 payload-
                   instead of MSS − 44 = 1456 (§3.1)                                        size
zeroed-cookie      the listener's cookie reply is built fresh:  hs        server  fail      rule 6.1 cookie-
                   socket ID, MSS and window 0 (§6.1 rule 3)                                round
fatal-exit-2       on its first data packet (server) or first   hs        both    fail      "fatal error: out
                   ACK (client): ``fatal error: out of                                      of memory"
                   memory``, a ~250-line dump of every
                   thread, exit 2
traceback-exit-1   at the same moment: a Python traceback       hs        both    fail      "KeyError"
                   (KeyError), exit 1
hang-on-close      close never returns, SIGTERM ignored: the    hs        both    fail      "still running"
                   server's after the peer's Shutdown, the
                   client's after its own
memory-growth      at the same moment, a loop that maps 32      hs        both    fail      "MemoryError" or
                   MiB more at a time (a page in 16 touched)                                "memory"
                   until a memory cap stops it, in well under
                   a second whatever the host's load (the zoo
                   sets RLIMIT_DATA 2 GiB itself where the
                   suite set no cap: it never takes the host)
buffered-output    the receiver writes OUTPUT only at its exit  hs        server  pass      –
other-handshake    another handshake version (a pure-Java UDT   hs        both    fail      rule 2 decodable,
                   of issue 41): a 28-byte body, no cookie                                  "could not decode"
                   round; the client's requests and the
                   server's response are 44-byte datagrams
                   (§5.1 asks for 48 bytes of body)
short-response     a 4.x cookie round, then a final response    hs        server  fail      rule 2 decodable,
                   cut after the socket ID: 44 bytes, no                                    "could not decode"
                   cookie or peer IP (§5.1, §6.1)
always-sending     never stops sending: from the first packet   hs        server  fail      "still running"
                   an address sends it (decodable or not), a
                   keep-alive to that address every 20 ms,
                   forever, also after its connection closed;
                   it ends only when killed
accepts-mss-0      takes a request's MSS as is, even 0 (no      hs        server  pass      probe server/
                   floor of 76, §6.1 TC): its response to an                                handshake-absurd-
                   MSS below 76 is cut to 44 bytes, then it                                 mss-ffs fails,
                   ACKs that address every 10 ms; the                                       naming MSS 0
                   references' MSS 1500 meets no defect
bound-v6-only      its listener is an AF_INET6 socket on        hs        server  pass      – (judged, not
                   ``::`` (Java's default): the port shows in                               failed at
                   /proc/net/udp6 only                                                      readiness)
=================  ===========================================  ========  ======  ========  ===================

(hs: ``handshake``, 1 KiB; tr: ``transfer``, 2 MiB; ``loss``: 1 MiB through the suite's
dropping relay. The crashing stacks — fatal-exit-2, traceback-exit-1, memory-growth — also meet
the probes ``server/msg-drop-dgram`` and ``client/nak-duplicates``, which must fail them.)

``buffered-output`` is invisible from outside while the receiver exits on its own: the
contract's "write OUTPUT as data arrives" matters only when the suite has to stop a role, and
this stack alone gives it no reason to; the zoo keeps it to show that the suite neither fails
nor blames anyone for it. The crashing stacks print :data:`~zoo.peer.CRASH_MARK` when their
defect strikes, so that the test knows, independently of the suite, that the stack crashed.

Three stacks of issue 41 meet the active tester as well: ``always-sending`` meets every probe
its test cases allow, and each must end within its deadline (two probes once waited minutes for
such a stack to go quiet); ``accepts-mss-0`` meets ``server/handshake-absurd-mss-ffs``, which
must fail it naming MSS 0; ``bound-v6-only``'s cells must be judged, not failed at readiness.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from udtharness.stacks import Stack, load

PEER = Path(__file__).resolve().parent / "peer.py"
TESTCASES = ["handshake", "transfer", "dgram", "loss"]


@dataclass(frozen=True)
class Defect:
    name: str
    roles: tuple[str, ...]  # the roles the zoo stack plays against each reference: where the defect lives
    cases: tuple[str, ...]
    verdict: str  # pass | reported | fail, in every cell it plays
    rule: str | None = None  # the wire rule that must name the zoo stack in every cell
    says: str | None = None  # a regex the one-line reason of every cell must match: what went wrong
    crashes: bool = False  # the stack dies of its defect (the probes must not pass it)

    @property
    def stack_name(self) -> str:
        return f"zoo-{self.name}"


BOTH = ("server", "client")
HS = ("handshake",)
DEFECTS = [
    Defect("healthy", BOTH, ("handshake", "transfer", "loss"), "pass"),
    Defect("no-ack", ("server",), HS, "fail", says="sent no ACK"),
    Defect("no-ack2", ("client",), ("transfer",), "reported", rule="udt4/8.6/ack2-for-every-ack"),
    Defect("no-retransmit", ("client",), ("loss",), "fail", says="never retransmitted"),
    Defect("wrong-isn", ("client",), HS, "fail", rule="udt4/4/first-data-is-isn"),
    Defect("oversize-payload", ("client",), ("transfer",), "fail", rule="udt4/3.1/payload-size"),
    Defect("zeroed-cookie", ("server",), HS, "fail", rule="udt4/6.1/cookie-round"),
    Defect("fatal-exit-2", BOTH, HS, "fail", says="fatal error: out of memory", crashes=True),
    Defect("traceback-exit-1", BOTH, HS, "fail", says="KeyError", crashes=True),
    Defect("hang-on-close", BOTH, HS, "fail", says="still running"),
    Defect("memory-growth", BOTH, HS, "fail", says="MemoryError|memory", crashes=True),
    Defect("buffered-output", ("server",), HS, "pass"),
    Defect("other-handshake", BOTH, HS, "fail", rule="udt4/2/decodable", says="could not decode"),
    Defect("short-response", ("server",), HS, "fail", rule="udt4/2/decodable", says="could not decode"),
    Defect("always-sending", ("server",), HS, "fail", says="still running"),
    Defect("accepts-mss-0", ("server",), HS, "pass"),
    Defect("bound-v6-only", ("server",), HS, "pass"),
]


def make_stack(root: Path, defect: Defect) -> Stack:
    """The zoo stack with ``defect``, as a stack directory under ``root`` (the adapter contract:
    meta.toml and an entrypoint), loaded as the suite loads a ``--stack PATH``."""
    d = root / defect.stack_name
    d.mkdir(parents=True)
    (d / "meta.toml").write_text(
        f'name = "{defect.stack_name}"\nversion = "0"\n'
        f'description = "the zoo stack with one defect: {defect.name} (conformance/tests/zoo)"\n'
        f"testcases = {TESTCASES!r}\n".replace("'", '"')
    )
    ep = d / "entrypoint"
    ep.write_text(f'#!/bin/sh\nexec "{sys.executable}" -u "{PEER}" {defect.name}\n')
    ep.chmod(0o755)
    return load(d)
