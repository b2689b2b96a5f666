"""Quick profiles: every experiment part with a ``profile`` table (experiments/*.toml), short
and scaled (×0.1), held to the part's bands — what a correct UDT 4.11 stack must reach there.
Each band sits in the experiment file next to the paper figure it stands for, with why it is
where it is (docs/testbed/quick-profiles.md, "Quick profiles").

Rates are L2 rates; a UDT data packet is 1456 payload bytes in a 1514-byte frame, so the best
goodput is 96.2 % of the emulated rate.

Scale 0.1 is a power of ten on purpose: UDT's increase (UDT4.md §12.3) picks a power
of ten from the spare bandwidth, so every path moves down exactly one row of the SC'04 Table 1
and the increase relative to the link is the same as at full scale. Other scales would not keep
the dynamics.
"""

from pathlib import Path

import pytest
from profiles import profile_cases, run_profile
from udtbed.experiments.experiment import load_all

pytestmark = [pytest.mark.needs_root, pytest.mark.slow, pytest.mark.long, pytest.mark.profile]
EXPERIMENTS = load_all()


CASES = profile_cases()


@pytest.mark.parametrize(("experiment", "part", "stack"), CASES, ids=["/".join(c) for c in CASES])
def test_part_meets_its_bands(tmp_path: Path, experiment: str, part: str, stack: str) -> None:
    exp = EXPERIMENTS[experiment]
    run_profile(tmp_path, exp, next(p for p in exp.parts if p.label == part), stack)
