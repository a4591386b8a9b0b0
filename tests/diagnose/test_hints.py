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


def test_torch_compile_is_suggested_to_an_eager_priced_torchtitan_run_only() -> None:
    """An eager-priced run's memory-bound work holds the eager element-wise kernels torch.compile fuses: its hint
    says so and how to price a compiled run; a compiled-priced run is told to check the compile, not to enable it."""
    eager = {key: hint(key, "torchtitan", eager=True) for key in ("gemm", "memory")}
    compiled = {key: hint(key, "torchtitan", eager=False) for key in ("gemm", "memory")}
    assert "torch.compile fuses them (--compile.enable" in eager["memory"]
    assert all("explain it with --torch-compile" in text for text in eager.values())
    assert not any("--compile.enable" in text or "--torch-compile" in text for text in compiled.values())
    assert "graph breaks" in compiled["memory"] and "--model.converters float8" in compiled["gemm"]
    # the other levers, and frameworks whose profile prices its own fused kernels, do not depend on it
    for key in KEYS:
        assert hint(key, "megatron", eager=True) == hint(key, "megatron")
        if key not in ("gemm", "memory"):
            assert hint(key, "torchtitan", eager=True) == hint(key, "torchtitan")
