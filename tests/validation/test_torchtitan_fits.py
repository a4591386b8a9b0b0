"""Which torchtitan layouts fit, as torchtitan's own pages say, out of sample (no memory constant is fitted).

pytorch/torchtitan docs/performance.md @157a12c (2024-04-24), 'Llama 2 performance numbers' on 64 A100 80GB with
FSDP2: Llama 2 70B at local batch 2 runs out of memory with selective (per-op or per-layer) recompute, runs at
local batch 1 with per-op selective recompute (355 tokens/s) and at local batch 2 with full recompute (353).
docs/performance.md (Llama 3.1 405B on 128 H100, local batch 2, full recompute): 'We do see OOM for 1D parallelism
(FSDP2), so we only tested 2D parallelism (FSDP2 + Tensor Parallel)'. Megatron's selective recompute (the attention
core alone) priced on torchtitan put the batch-1 run at 96 GiB of activations: it did not fit.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.validation.cases import project_dir
from clustersim.validation.training import estimate_case

CATALOG = load_catalog(use_env=False)


def _case(case_id: str, **parallel: Any) -> dict[str, Any]:
    with (project_dir() / "training.jsonl").open() as lines:
        (case,) = [c for c in map(json.loads, lines) if c["id"] == case_id]
    changed = copy.deepcopy(case)
    changed["parallel"].update(parallel)
    return changed


LLAMA2_70B = "titan202404_llama2-70b_a100-80gb_64gpu_fsdp64_lbs1_sacop_bf16"
LLAMA31_405B = "titan202408_llama3.1-405b_h100_128gpu_fsdp16_tp8_lbs2_full_bf16"


@pytest.mark.parametrize(
    ("case", "fits"),
    [
        (_case(LLAMA2_70B), True),  # local batch 1, per-op selective recompute: 355 tokens/s
        (_case(LLAMA2_70B, micro_batch=2, global_batch=128), False),  # local batch 2, selective: OOM
        (_case(LLAMA2_70B, micro_batch=2, global_batch=128, recompute="full"), True),  # full recompute: 353
        (_case(LLAMA31_405B), True),  # FSDP 16 x TP 8
        (_case(LLAMA31_405B, tp=1, dp=128, sequence_parallel=False, global_batch=256), False),  # FSDP 128 alone
    ],
    ids=["70b-lbs1-sac", "70b-lbs2-sac-oom", "70b-lbs2-full", "405b-2d", "405b-1d-oom"],
)
def test_the_layouts_torchtitan_ran_fit_and_those_it_reports_out_of_memory_do_not(case: dict, fits: bool) -> None:
    estimate = estimate_case(case, CATALOG)
    assert estimate.fits is fits, (estimate.memory.required_bytes / 2**30, estimate.capacity_bytes / 2**30)


TRAINY = "titantrainy202506_llama3.1-8b_h200_32gpu_fsdp32_lbs2_sacop_fp8"


def test_a_loss_compiled_with_the_model_holds_4_bytes_a_logit_not_12() -> None:
    compiled = _case(TRAINY)
    uncompiled = copy.deepcopy(compiled)
    uncompiled["software"]["compiled_loss"] = False
    logits = 2 * 8192 * 128256  # local batch 2 of 8,192 tokens
    freed = estimate_case(uncompiled, CATALOG).memory.activations_bytes
    freed -= estimate_case(compiled, CATALOG).memory.activations_bytes
    assert freed == pytest.approx((12 - 4) * logits)


@pytest.mark.parametrize(
    ("software", "words"),
    [
        ({"framework": "torchtitan", "compiled": False, "compiled_loss": True}, "needs software.compiled true"),
        ({"framework": "megatron", "compiled": True, "compiled_loss": True}, "megatron's loss is its own kernel"),
    ],
)
def test_a_compiled_loss_is_refused_without_a_compiled_run_or_on_a_fused_loss(software: dict, words: str) -> None:
    case = _case(TRAINY)
    case["software"] = software
    with pytest.raises(ClusterSimError, match=words):
        estimate_case(case, CATALOG)
