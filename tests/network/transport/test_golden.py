"""One seeded comparison against a stored result, byte for byte: a change to the simulator's
behaviour shows here. A missing golden file fails; after an intended change, rewrite it and review
the diff: ``CLUSTERSIM_UPDATE_GOLDEN=1 python -m pytest tests/network/transport/test_golden.py``."""

import json
from dataclasses import asdict
from pathlib import Path

from clustersim.network.transport.experiments import Scenario, compare
from tests.snapshots import recorded

GOLDEN = Path(__file__).parents[2] / "data" / "transport" / "golden_compare.json"
# RC as it was before lossless links (drop-tail, go-back-N, a 67 ms timeout): the stored bytes still hold
SCENARIO = Scenario(
    message_bytes=64 << 10,
    num_messages=30,
    num_paths=4,
    loss=0.01,
    background=0.3,
    seed=7,
    rc_flow_control="none",
    rc_recovery="go-back-n",
    rc_timeout_exponent=14,
)


def test_a_seeded_comparison_is_byte_identical_to_the_stored_one():
    text = json.dumps([asdict(r) for r in compare(SCENARIO)], indent=1) + "\n"
    command = "python -m pytest tests/network/transport/test_golden.py"
    assert text == recorded(GOLDEN, text, flag="CLUSTERSIM_UPDATE_GOLDEN", command=command), (
        f"the seeded comparison differs from {GOLDEN}; if intended, rerun with CLUSTERSIM_UPDATE_GOLDEN=1"
    )
