"""Our `udt` through the impairment sweep (impairment_sweep.py): a 100 Mb/s path with 20 ms RTT
through `udt-linkem`, clean, with 1/5/10 % loss, 2 % reordering, 5 % duplication, a mix of the
three, and a 2 s outage, one seed, sizes a quarter of the benchmark's (`make bench` runs five
seeds at full size: impl/bench/impairments.py).

udt-rs -> udt-rs must deliver every byte (sha256 of a random file), both sides exiting 0 before
the condition's timeout. libudt 4.11 -> libudt 4.11 runs beside it through the same drops; its
result and both goodputs go into a table printed at the end of the session (and written to
``impairments.txt`` in pytest's base temp directory). libudt failing is a finding about libudt,
not a failure of the test (at 10 % loss it is known to stall, and to deliver wrong bytes with
exit 0).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from impairment_sweep import CONDITIONS, Condition, Outcome, run
from udtharness import netns
from udtharness.stacks import reference_stack, registry

pytestmark = pytest.mark.needs_root

# Apart from the other interop tests' namespaces.
PREFIX = "udti-"
SEED = 1
SCALE = 0.25
TITLE = "impairment sweep, seed 1 (udt-rs must be ok; libudt recorded)"


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Where the inputs live (one random file per size); stale namespaces of killed runs go first."""
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces and iptables rules")
    netns.cleanup(PREFIX, live=False)
    yield tmp_path_factory.mktemp("impairments")


@pytest.fixture(scope="module")
def sweep_table(
    session_report: dict[str, list[str]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[Outcome, Outcome]]]:
    """Condition -> (udt-rs's outcome, libudt's), printed and written to a file at the end."""
    rows: dict[str, tuple[Outcome, Outcome]] = {}
    yield rows
    path = tmp_path_factory.getbasetemp() / "impairments.txt"
    lines = [f"{'condition':<20}{'udt-rs':<14}{'Mb/s':>8}   {'libudt':<14}{'Mb/s':>8}   ratio"]
    for name, (ours, ref) in rows.items():
        r = f"{ours.mbps / ref.mbps:.2f}x" if ours.ok and ref.ok and ref.mbps > 0 else "-"
        lines.append(f"{name:<20}{ours.status:<14}{ours.mbps:>8.2f}   {ref.status:<14}{ref.mbps:>8.2f}   {r}")
    for ours, ref in rows.values():
        lines += [f"  {o.stack} {o.condition}: {o.status}: {o.detail[:300]}" for o in (ours, ref) if not o.ok]
    path.write_text("\n".join(lines) + "\n")
    session_report[f"{TITLE}, also in {path}"] = lines


@pytest.mark.parametrize("cond", CONDITIONS, ids=[c.name for c in CONDITIONS])
def test_udt_rs_delivers_every_byte_through(
    cond: Condition, sweep_dir: Path, sweep_table: dict[str, tuple[Outcome, Outcome]]
) -> None:
    stacks = registry()
    ours = run(stacks["udt-rs"], cond, SEED, sweep_dir, PREFIX, SCALE)
    ref = run(stacks[reference_stack("udt", stacks)], cond, SEED, sweep_dir, PREFIX, SCALE)
    sweep_table[cond.name] = (ours, ref)
    assert ours.ok, f"udt-rs -> udt-rs through {cond.spec(SEED)}: {ours.status}: {ours.detail}"
    assert not ours.outage_missed, f"the transfer ended before the {cond.outage_s:g} s outage was over"
