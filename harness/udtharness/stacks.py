"""The registry of stacks: every stack the project runs, one directory each.

A stack is a directory ``<name>/`` with a ``meta.toml``. The shipped ones live in
``stacks/``; a third party's adapters can live anywhere: the directories listed in
``STACKS_DIR`` (os.pathsep-separated, each holding stack directories) are searched first, and
single stack directories can be added by path (the conformance suite's ``run --stack PATH``). It is the
only list of stacks in the project: the conformance suite, the interop tests (``impl/interop``),
the benchmark (``impl/bench``) and the testbed all read it (:func:`registry`). Two stacks with
one name are an error naming both directories.

A stack's ``requires`` (build products that must exist) are paths relative to the stack
directory, with ``${REPO_ROOT}`` standing for this repository's root; its optional ``build``
command (``/bin/sh -c``, run in the stack directory with ``REPO_ROOT`` set) makes them
(:func:`build`).

* A stack speaks one ``protocol``: ``udt`` (UDT4, the default), ``sabul`` (SABUL,
  docs/spec/SABUL.md), ``frtp`` (FRTP, docs/spec/FRTP.md) or ``tcp`` (kernel TCP, a testbed
  baseline with no conformance cases).
  Each conformance protocol has its own test cases (:data:`PROTOCOL_TESTCASES`), and the suite
  pairs a stack only with stacks of its own protocol.
* A stack with conformance test cases (non-empty ``testcases``) also has an executable
  ``entrypoint``, the adapter contract (docs/conformance/adapter-contract.md). The suite never
  calls a stack's binary directly: it sets ``ROLE``, ``TESTCASE``, addresses and file paths in
  the environment and reads the exit code (0 = pass, 127 = test case not supported, 1–125 =
  failure; a signal, 126, 128 and above, or a crash line in the log = a crash). Every process
  runs under the memory and CPU caps of :mod:`udtharness.processes`. :func:`discover` lists these
  stacks.
* An optional ``[bulk]`` table says how the testbed and the benchmark run one bulk transfer
  with the stack (:class:`Bulk`): through the ``udt`` command line of docs/cli.md
  (``udt-cli``), the ``sabul`` one (``sabul-cli``: the sender listens), or as kernel TCP
  through iperf3 (``iperf3``).
"""

from __future__ import annotations

import os
import subprocess
import tomllib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .processes import StackProcess, start
from .processes import stop as stop  # where the suite has always found it

EXIT_OK = 0
EXIT_UNSUPPORTED = 127

REPO_ROOT = Path(__file__).resolve().parents[2]
STACKS_DIR = REPO_ROOT / "stacks"  # the shipped stacks; the STACKS_DIR variable adds more
REPO_ROOT_VAR = "${REPO_ROOT}"
# What `run --stack` pairs a UDT stack under test with when --against is not given.
REFERENCE_STACKS = ("libudt", "udt-rs")
# ... and a stack of each protocol (those of these names that are in the registry): the SABUL
# partners are the Rust `sabul` (once its directory exists) and the suite's own `sabul-py`; the
# FRTP ones the Rust `frtp` and the suite's `frtp-py`.
PARTNERS = {"udt": REFERENCE_STACKS, "sabul": ("sabul", "sabul-py"), "frtp": ("frtp", "frtp-py")}

UDT_TESTCASES = ("handshake", "mss", "transfer", "dgram", "rendezvous", "loss", "wrap", "multiconnect", "close")
SABUL_TESTCASES = ("handshake", "mss", "transfer", "loss", "empty")
FRTP_TESTCASES = ("handshake", "transfer", "loss", "empty")
# The wire protocol a stack speaks and its conformance test cases (docs/conformance/adapter-contract.md).
PROTOCOL_TESTCASES: dict[str, tuple[str, ...]] = {
    "udt": UDT_TESTCASES,
    "sabul": SABUL_TESTCASES,
    "frtp": FRTP_TESTCASES,
    "tcp": (),
}
PROTOCOLS = tuple(PROTOCOL_TESTCASES)
# Every test case name some protocol defines (a case name means the same step in each protocol).
TESTCASES = tuple(dict.fromkeys(c for cases in PROTOCOL_TESTCASES.values() for c in cases))
# For each bulk-transfer contract the protocol it implies.
BULK_CONTRACTS = {"udt-cli": "udt", "sabul-cli": "sabul", "frtp-cli": "frtp", "iperf3": "tcp"}
_BULK_KEYS = ("contract", "binary", "binary_env", "build", "congestion_control")


class StackError(RuntimeError):
    """A stack's meta.toml or entrypoint does not follow the contract, a selected stack is not
    in the registry, or a stack's bulk binary is not built. The message says which and where."""


@dataclass(frozen=True)
class Bulk:
    """How the testbed and the benchmark run a bulk transfer with a stack (``[bulk]`` in meta.toml).

    ``contract`` is ``"udt-cli"``, ``"sabul-cli"`` or ``"frtp-cli"`` (the command lines of docs/cli.md, run from
    ``binary``) or ``"iperf3"`` (kernel TCP with ``congestion_control``, e.g. ``"cubic"``).
    ``binary`` is resolved when the registry is read: the value of the environment variable
    ``binary_env`` when that is set, else the meta.toml path made absolute against the repo root.
    ``build`` is the command that builds it, for error messages.
    """

    contract: str
    binary: Path | None = None
    binary_env: str | None = None
    build: str | None = None
    congestion_control: str | None = None


@dataclass(frozen=True)
class Stack:
    """One registry entry, as :func:`load` read it from ``path/meta.toml``."""

    name: str
    path: Path
    version: str
    description: str
    testcases: tuple[str, ...]
    requires: tuple[Path, ...] = ()  # absolute: resolved against the stack directory / ${REPO_ROOT}
    build: str | None = None  # shell command that makes ``requires`` (run in ``path``)
    reference: bool = False
    protocol: str = "udt"
    bulk: Bulk | None = None
    meta: dict[str, object] = field(default_factory=dict, compare=False, hash=False)

    @property
    def entrypoint(self) -> Path:
        return self.path / "entrypoint"

    @property
    def conformance(self) -> bool:
        """Whether the conformance suite runs this stack (it lists conformance test cases)."""
        return bool(self.testcases)

    @property
    def protocol_testcases(self) -> tuple[str, ...]:
        """The test cases the suite defines for this stack's protocol."""
        return PROTOCOL_TESTCASES[self.protocol]

    def bulk_binary(self) -> Path:
        """The executable of a ``udt-cli`` or ``sabul-cli`` stack; a :class:`StackError` that says how to build it
        (or which variable points elsewhere) when it is not there."""
        if self.bulk is None or self.bulk.binary is None:
            raise StackError(f"stack '{self.name}' has no [bulk] binary in {self.path / 'meta.toml'}")
        path = self.bulk.binary
        if not (path.is_file() and os.access(path, os.X_OK)):
            how = [f"build it with `{self.bulk.build}`"] if self.bulk.build else []
            if self.bulk.binary_env:
                how.append(f"point ${self.bulk.binary_env} at a binary")
            hint = f" ({', or '.join(how)})" if how else ""
            raise StackError(f"stack '{self.name}' is not built: {path} does not exist or is not executable{hint}")
        return path

    def missing(self) -> list[str]:
        """Required build products that are not there (the stack is then skipped, not failed)."""
        return [str(r) for r in self.requires if not r.exists()]

    @property
    def available(self) -> bool:
        return not self.missing()

    def supports(self, testcase: str) -> bool:
        return testcase in self.testcases

    def env(self, role: str, testcase: str, **values: str | int | Path) -> dict[str, str]:
        env = dict(os.environ)
        env.update({"ROLE": role, "TESTCASE": testcase, "REPO_ROOT": str(REPO_ROOT)})
        env.update({k: str(v) for k, v in values.items()})
        return env

    def start(self, role: str, testcase: str, logdir: Path, **values: str | int | Path) -> StackProcess:
        """Start the entrypoint under the suite's limits (:mod:`udtharness.processes`); its stdout
        and stderr go to ``logdir/<role>.log``."""
        logdir.mkdir(parents=True, exist_ok=True)
        return start(self.entrypoint, self.env(role, testcase, LOGDIR=logdir, **values), logdir / f"{role}.log")

    def compliance_check(self, logdir: Path, timeout: float = 10.0) -> tuple[bool, str]:
        """Run an unknown test case in both roles; the contract demands exit code 127."""
        case = f"udtc-unknown-{uuid.uuid4().hex[:8]}"
        for role in ("server", "client"):
            p = self.start(
                role,
                case,
                logdir,
                SERVER_ADDR="127.0.0.1",
                SERVER_PORT=9,
                CLIENT_ADDR="127.0.0.1",
                INPUT=os.devnull,
                OUTPUT=logdir / "unused",
            )
            try:
                rc = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                stop(p)
                return False, f"{role} role did not exit within {timeout} s for unknown TESTCASE {case}"
            if rc != EXIT_UNSUPPORTED:
                return False, f"{role} role exited {rc} for unknown TESTCASE {case}, expected 127"
        return True, "unknown TESTCASE → 127 in both roles"


def _string(meta_path: Path, table: Mapping[str, object], key: str, where: str = "") -> str | None:
    value = table.get(key)
    if value is not None and not isinstance(value, str):
        raise StackError(f"{meta_path}: '{where}{key}' must be a string, not {value!r}")
    return value


def _strings(meta_path: Path, table: Mapping[str, object], key: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise StackError(f"{meta_path}: '{key}' must be a list of strings, not {value!r}")
    return tuple(str(v) for v in value)


def _requires(meta_path: Path, table: Mapping[str, object]) -> tuple[Path, ...]:
    """``requires`` entries as absolute paths: ``${REPO_ROOT}`` expanded, the rest relative to
    the stack directory (the meta.toml's directory)."""
    out = []
    for r in _strings(meta_path, table, "requires"):
        expanded = r.replace(REPO_ROOT_VAR, str(REPO_ROOT))
        if "$" in expanded:
            raise StackError(
                f"{meta_path}: requires entry {r!r}: only {REPO_ROOT_VAR} is expanded; write other paths "
                "relative to the stack directory or absolute"
            )
        out.append(Path(os.path.normpath(meta_path.parent.absolute() / expanded)))  # symlinks kept
    return tuple(out)


def _bulk(meta_path: Path, protocol: str, table: object) -> Bulk:
    if not isinstance(table, dict):
        raise StackError(f"{meta_path}: 'bulk' must be a table ([bulk]), not {table!r}")
    unknown = sorted(set(table) - set(_BULK_KEYS))
    if unknown:
        raise StackError(f"{meta_path}: unknown key(s) {unknown} in [bulk]; known: {list(_BULK_KEYS)}")
    contract, binary, binary_env, build, cc = (_string(meta_path, table, k, "bulk.") for k in _BULK_KEYS)
    if contract is None:
        raise StackError(f"{meta_path}: [bulk] needs 'contract', one of {list(BULK_CONTRACTS)}")
    if contract not in BULK_CONTRACTS:
        raise StackError(f"{meta_path}: [bulk] contract {contract!r} is not one of {list(BULK_CONTRACTS)}")
    if BULK_CONTRACTS[contract] != protocol:
        raise StackError(
            f"{meta_path}: [bulk] contract '{contract}' runs {BULK_CONTRACTS[contract]}, but protocol is '{protocol}'"
        )
    if contract in ("udt-cli", "sabul-cli", "frtp-cli") and not binary:
        raise StackError(f"{meta_path}: [bulk] contract '{contract}' needs 'binary' (path relative to the repo root)")
    if contract == "iperf3" and not cc:
        raise StackError(f"{meta_path}: [bulk] contract 'iperf3' needs 'congestion_control' (e.g. \"cubic\")")
    if contract != "iperf3" and cc:
        raise StackError(f"{meta_path}: [bulk] 'congestion_control' only applies to contract 'iperf3'")
    resolved: Path | None = None
    override = os.environ.get(binary_env) if binary_env else None
    if override:
        resolved = Path(override).absolute()
    elif binary:
        resolved = REPO_ROOT / binary
    return Bulk(contract, resolved, binary_env, build, cc)


def load(path: Path) -> Stack:
    """Reads and checks ``path/meta.toml``; a :class:`StackError` names the file and the problem."""
    meta_path = path / "meta.toml"
    if not meta_path.is_file():
        raise StackError(f"{path}: no meta.toml")
    try:
        with open(meta_path, "rb") as f:
            meta = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise StackError(f"{meta_path}: not valid TOML: {e}") from e
    for key in ("name", "version", "testcases"):
        if key not in meta:
            raise StackError(f"{meta_path}: missing key '{key}'")
    if meta["name"] != path.name:
        raise StackError(f"{meta_path}: name '{meta['name']}' differs from the directory name '{path.name}'")
    protocol = _string(meta_path, meta, "protocol") or "udt"
    if protocol not in PROTOCOLS:
        raise StackError(f"{meta_path}: protocol {protocol!r} is not one of {list(PROTOCOLS)}")
    testcases = _strings(meta_path, meta, "testcases")
    if testcases and not PROTOCOL_TESTCASES[protocol]:
        raise StackError(f"{meta_path}: testcases are conformance cases; a '{protocol}' stack lists none")
    if testcases:
        ep = path / "entrypoint"
        if not (ep.is_file() and os.access(ep, os.X_OK)):
            raise StackError(f"{path}: entrypoint missing or not executable (needed: testcases is not empty)")
    bulk = _bulk(meta_path, protocol, meta["bulk"]) if "bulk" in meta else None
    return Stack(
        name=meta["name"],
        path=path,
        version=str(meta["version"]),
        description=_string(meta_path, meta, "description") or "",
        testcases=testcases,
        requires=_requires(meta_path, meta),
        build=_string(meta_path, meta, "build"),
        reference=bool(meta.get("reference", False)),
        protocol=protocol,
        bulk=bulk,
        meta=meta,
    )


def search_path(environ: Mapping[str, str] = os.environ) -> list[Path]:
    """The directories whose subdirectories are stacks: ``$STACKS_DIR``'s entries (os.pathsep-
    separated, in order), then the shipped ``stacks/``."""
    extra = [Path(d).expanduser() for d in environ.get("STACKS_DIR", "").split(os.pathsep) if d.strip()]
    for d in extra:
        if not d.is_dir():
            raise StackError(
                f"STACKS_DIR: {d} is not a directory (STACKS_DIR lists directories that hold stack directories, "
                f"each with a meta.toml; separate several with '{os.pathsep}')"
            )
    return [*extra, STACKS_DIR]


def stack_dir(path: Path) -> Path:
    """A single stack directory given by path (``--stack``), checked to hold a meta.toml."""
    path = path.expanduser()
    if not path.is_dir():
        raise StackError(f"{path}: not a directory (a stack is a directory with meta.toml and entrypoint)")
    if not (path / "meta.toml").is_file():
        raise StackError(
            f"{path}: no meta.toml (a stack directory needs meta.toml and an executable entrypoint; "
            "see docs/conformance/adapter-contract.md)"
        )
    return path.resolve()


def registry(root: Path | Iterable[Path] | None = None, stacks: Iterable[Path] = ()) -> dict[str, Stack]:
    """Every stack by name (sorted): conformance stacks and bulk-only ones (TCP).

    ``root`` is one directory of stack directories, several, or ``None`` for :func:`search_path`
    (``$STACKS_DIR``, then the shipped stacks); ``stacks`` adds single stack directories (first).
    A name defined twice is a :class:`StackError` naming both directories."""
    roots = search_path() if root is None else [root] if isinstance(root, Path) else list(root)
    dirs = [stack_dir(Path(s)) for s in stacks]
    for r in roots:
        dirs += sorted(p for p in r.iterdir() if (p / "meta.toml").is_file())
    found: dict[str, Stack] = {}
    for d in dirs:
        if d.name in found and found[d.name].path.resolve() == d.resolve():
            continue  # the same directory named twice (e.g. --stack on a registry stack)
        stack = load(d)
        if stack.name in found:
            raise StackError(
                f"two stacks named '{stack.name}': {found[stack.name].path / 'meta.toml'} and {d / 'meta.toml'}; "
                "rename one (its directory and its name = in meta.toml) or leave one out of STACKS_DIR/--stack"
            )
        found[stack.name] = stack
    return dict(sorted(found.items()))


def reference_stacks(stacks: Mapping[str, Stack] | None = None) -> dict[str, str]:
    """The reference stack of each protocol (``reference = true`` in its meta.toml: libudt, UDT
    4.11, for UDT), by protocol, from ``stacks`` or :func:`registry`."""
    found = registry() if stacks is None else stacks
    return {s.protocol: name for name, s in found.items() if s.reference}


def reference_stack(protocol: str = "udt", stacks: Mapping[str, Stack] | None = None) -> str:
    """The name of ``protocol``'s reference stack (:func:`reference_stacks`); a
    :class:`StackError` that says what to add where the registry has none."""
    ref = reference_stacks(stacks).get(protocol)
    if ref is None:
        raise StackError(
            f"no stack of protocol '{protocol}' is marked reference = true in its meta.toml "
            f"(searched: {', '.join(str(p) for p in search_path())}); the shipped registry marks libudt"
        )
    return ref


def discover(selected: str | None = None, root: Path | Iterable[Path] | None = None) -> list[Stack]:
    """The conformance stacks (non-empty ``testcases``) of :func:`registry`, sorted, or the
    comma-separated ``selected`` names in the order given."""
    stacks = registry(root)
    return select(stacks, selected)


def select(stacks: Mapping[str, Stack], selected: str | None) -> list[Stack]:
    """The conformance stacks of ``stacks``, or the comma-separated ``selected`` names in order."""
    conformance = [s.name for s in stacks.values() if s.conformance]
    if not selected:
        return [stacks[n] for n in conformance]
    wanted = list(dict.fromkeys(s.strip() for s in selected.split(",") if s.strip()))
    unknown = [w for w in wanted if w not in stacks]
    if unknown:
        raise StackError(f"unknown stack(s) {unknown}; conformance stacks: {conformance}")
    bulk_only = [w for w in wanted if not stacks[w].conformance]
    if bulk_only:
        raise StackError(
            f"stack(s) {bulk_only} have no conformance test cases (registry entries for the testbed "
            f"and the benchmark only); conformance stacks: {conformance}"
        )
    return [stacks[w] for w in wanted]


def build(stack: Stack, log: Path, timeout: float = 3600.0) -> None:
    """Run the stack's ``build`` command (if any) in its directory with ``REPO_ROOT`` set, output
    to ``log``; a :class:`StackError` with the command and the log's tail when it fails or when
    ``requires`` are still missing afterwards."""
    log.parent.mkdir(parents=True, exist_ok=True)
    if stack.build:
        env = dict(os.environ, REPO_ROOT=str(REPO_ROOT))
        with open(log, "wb") as out:
            out.write(f"$ cd {stack.path} && {stack.build}\n".encode())
            out.flush()
            try:
                rc = subprocess.run(
                    stack.build,
                    shell=True,
                    cwd=stack.path,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=timeout,
                ).returncode
            except subprocess.TimeoutExpired:
                rc = None
        if rc != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
            status = f"exit {rc}" if rc is not None else f"no result within {timeout:.0f} s"
            raise StackError(
                f"stack '{stack.name}': build failed ({status}): `{stack.build}` in {stack.path}\n"
                f"--- last lines of {log} ---\n{tail}\n--- fix the build (meta.toml 'build') and run again"
            )
    missing = stack.missing()
    if missing:
        how = f"its build `{stack.build}` ran but did not make them" if stack.build else "meta.toml has no 'build'"
        raise StackError(
            f"stack '{stack.name}' is not built: {', '.join(missing)} missing ({how}); "
            f"build them, or fix 'requires'/'build' in {stack.path / 'meta.toml'}"
        )
