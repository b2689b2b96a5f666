"""The FRTP active tester (udtconf.frtp.tester) against every selected FRTP stack, in the role
each probe needs: the stack as the sender (the tester connects as a misbehaving receiver) or as
the receiver (the tester listens as a misbehaving sender). ``pass``: the stack refused, aborted
or coped as FRTP.md asks; ``fail``: it echoed what it must refuse, hung, crashed, exceeded the
negotiated rate, or lost or invented data."""

from __future__ import annotations

from pathlib import Path

import pytest
from udtconf.frtp.tester import PROBES, FrtpProbe, run_probe
from udtconf.stacks import Stack
from verdicts import probe_verdict

pytestmark = [pytest.mark.slow, pytest.mark.active, pytest.mark.protocols("frtp")]


@pytest.mark.parametrize("probe", PROBES, ids=[p.id for p in PROBES])
def test_frtp_probe(stack: Stack, probe: FrtpProbe, results_dir: Path, record_property) -> None:  # type: ignore[no-untyped-def]
    probe_verdict(stack, probe, run_probe, results_dir, record_property, spec="FRTP.md", plays=f"as the {probe.role}")
