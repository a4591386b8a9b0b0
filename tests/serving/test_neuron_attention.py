"""transformers-neuronx's attention as its HLO runs it: native context attention, whose materialized scores move
through HBM (``score_bytes``, a cost that grows as the padded prompt squared), and decode attention that reads a KV
head once per query head of its group (``repeat_kv``: no GQA decode kernel)."""

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.serving.engine import (
    ServingSystem,
    StepTimes,
    default_calibration,
    serving_system_for_accelerator,
    step_times,
)
from clustersim.serving.engines import EngineProfile, engine_profile, engine_profiles
from clustersim.workload.transformer import Transformer

CATALOG = load_catalog(use_env=False)
LLAMA2_70B = Transformer(
    name="llama2-70b", layers=80, hidden=8192, ffn_hidden=28672, heads=64, kv_heads=8, vocab=32000, ffn_type="swiglu"
)
TNX = engine_profile("transformers-neuronx")


def trn1() -> ServingSystem:
    return serving_system_for_accelerator(CATALOG, "trainium1", tp=32, devices_per_node=32, instance="trn1.32xlarge")


def prefill(prompt: float, engine: EngineProfile) -> StepTimes:
    return step_times(
        LLAMA2_70B,
        trn1(),
        Dtype.BF16,
        Dtype.BF16,
        decode_sequences=np.array([0.0]),
        decode_context_tokens=prompt,
        prefill_tokens=np.array([prompt]),
        prefill_sequences=np.array([1.0]),
        prompt_tokens=prompt,
        engine=engine,
    )


def test_native_attention_moves_its_scores_through_hbm_as_the_prompt_squared() -> None:
    flash = TNX.model_copy(update={"score_bytes": None})
    extra = {
        n: float((prefill(n, TNX).prefill_attention_s - prefill(n, flash).prefill_attention_s)[0]) for n in (1024, 2048)
    }
    assert extra[2048] == pytest.approx(4.0 * extra[1024], rel=1e-9)
    # 2 query heads a rank x 80 layers x 2048^2 scores x 25 bytes over a NeuronCore-v2's share of the HBM
    bandwidth = trn1().system.memory_bandwidth_bytes_per_s * default_calibration().hbm_efficiency
    assert extra[2048] == pytest.approx(25.0 * 2 * 80 * 2048**2 / bandwidth, rel=1e-9)
    assert 0.02 < extra[2048] < 0.1  # tens of ms beside the ~0.5 s a 2,048-token prompt takes


def test_only_the_engines_without_a_flash_kernel_pay_for_scores() -> None:
    paying = {name for name, p in engine_profiles(use_env=False).items() if p.score_bytes}
    assert paying == {"transformers-neuronx", "optimum-neuron-tnx"}  # NxD's kernels keep the scores on chip
    nxd = engine_profile("nxd-inference")
    assert TNX.native_score_bytes(2048.0, 160.0) > 0 == nxd.native_score_bytes(2048.0, 160.0)
    assert TNX.model_copy(update={"score_bytes": 0.0}).native_score_bytes(4096.0, 80.0) == 0.0
    with pytest.raises(ValueError, match="score_bytes"):
        EngineProfile.model_validate({**TNX.model_dump(), "score_bytes": -1.0})


def test_transformers_neuronx_decode_reads_a_kv_head_once_per_query_head() -> None:
    kernel = TNX.model_copy(update={"gqa_decode_kernel": True})

    def decode(engine: EngineProfile) -> float:
        step = step_times(
            LLAMA2_70B,
            trn1(),
            Dtype.BF16,
            Dtype.BF16,
            decode_sequences=np.array([4.0]),
            decode_context_tokens=3072.0,
            prefill_tokens=0.0,
            prefill_sequences=0.0,
            prompt_tokens=2048.0,
            engine=engine,
        )
        return float(step.decode_attention_s[0])

    # 64 query heads on 32 ranks, each rank's KV head (8 replicated to 32) read by its 2 query heads
    assert decode(TNX) == pytest.approx(2.0 * decode(kernel), rel=0.02)
    assert not TNX.gqa_decode_kernel and engine_profile("nxd-inference").gqa_decode_kernel
