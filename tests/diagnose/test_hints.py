"""Each lever's hint names the run's framework's own settings, and no other framework's."""

from __future__ import annotations

import pytest

from clustersim.diagnose.hints import FLAGS, NEUTRAL, hint
from clustersim.diagnose.levers import COMM_TERMS

KEYS = ("gemm", "attention", "memory", "optimizer", *COMM_TERMS, "recompute", "pipeline bubble", "data loading")


@pytest.mark.parametrize("key", KEYS)
def test_every_lever_has_a_neutral_check_and_each_framework_only_its_own_flags(key: str) -> None:
    assert hint(key, "fsdp") == NEUTRAL[key]  # a framework without flags here: the neutral check alone
    megatron, titan = hint(key, "megatron"), hint(key, "torchtitan")
    assert megatron.startswith(NEUTRAL[key]) and titan.startswith(NEUTRAL[key])
    assert "--parallelism." not in megatron and "--activation_checkpoint" not in megatron
    assert "--overlap-grad-reduce" not in titan and "NVTE_" not in titan and "--recompute-" not in titan
    assert hint(key, "megatron-deepspeed") == megatron.replace("(megatron:", "(megatron-deepspeed:")


def test_the_torchtitan_flags_are_its_job_config_s() -> None:
    assert "--activation_checkpoint.mode" in hint("recompute", "torchtitan")
    assert "--parallelism.fsdp_reshard_after_forward" in hint("dp comm", "torchtitan")
    assert set(FLAGS["torchtitan"]) <= set(NEUTRAL) and set(FLAGS["megatron"]) <= set(NEUTRAL)
