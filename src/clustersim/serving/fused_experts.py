"""Fused MoE kernels: where an engine's routed experts run as Blackwell CuTe DSL grouped GEMMs.

A MoE layer costs more than its experts' FLOPs: the tokens are sorted by expert and copied into per-expert rows,
the grouped GEMMs run part-empty tiles, the activation and its quantization make passes of their own, and each
token's rows are gathered back and weighted. The serving calibration prices that as a time per token and MoE layer
(``moe_token_layer_s``), fitted on TensorRT-LLM's CUTLASS MoE backend, its default. TensorRT-LLM's CUTEDSL backend
(``moe_backend: CUTEDSL``; ``tensorrt_llm/_torch/modules/fused_moe/fused_moe_cute_dsl.py``, ``CuteDslFusedMoE``)
quantizes each token once before the exchange, permutes 4-bit rows, runs both grouped GEMMs as CuTe DSL kernels
for Blackwell (``cute_dsl_nvfp4_grouped_gemm_blackwell``) with the activation and its quantization in one pass,
and un-permutes with the routing weights applied: a profile or case that states it (``fused_expert_mlp``) pays no
``moe_token_layer_s``.

The evidence: MLPerf Inference v6.0's DeepSeek-R1 configs differ from v5.1's, at the same batch caps on 8 B200,
only in ``moe_backend`` (WIDEEP -> CUTEDSL), and the offline throughput of the three v6.0 B200 submissions is
1.71-1.76x v5.1's; with the per-token cost dropped the closed form's offline throughput of the 17 v6.0 DeepSeek-R1
offline runs (B200, B300, GB200, GB300; 8 to 288 GPUs) moves from 36% too slow to 6% MAPE
(``validation/project/inference.jsonl``, ``mlperf60_deepseek-r1_*``).

The kernels need compute capability 10 and an 8- or 4-bit format (the CUTEDSL backend's NVFP4 and FP8 block-scale
paths), as Transformer Engine's fused grouped MLP does in training (``compute.fused_expert_mlp``): elsewhere, or for a
dense model, the setting is refused.
"""

from __future__ import annotations

from clustersim.compute.fused_expert_mlp import FUSED_EXPERT_MLP_FAMILY
from clustersim.errors import ClusterSimError
from clustersim.serving.calibration import InferenceCalibration
from clustersim.serving.engines import EngineProfile
from clustersim.serving.formats import ServingPrecision, bytes_per_element
from clustersim.serving.serving_system import ServingSystem
from clustersim.workload.transformer import Transformer


def moe_token_cost_s(profile: EngineProfile, cal: InferenceCalibration) -> float:
    """Seconds per token and MoE layer beyond the routed experts' FLOPs: none where the experts run fused."""
    return 0.0 if profile.fused_expert_mlp else cal.moe_token_layer_s


def check_fused_experts(
    model: Transformer, system: ServingSystem, precision: ServingPrecision, profile: EngineProfile
) -> None:
    """A profile's ``fused_expert_mlp`` needs a MoE model, a Blackwell GPU and 8- or 4-bit weights."""
    if not profile.fused_expert_mlp:
        return
    why = ""
    if model.moe is None:
        why = f"{model.name} is dense: no routed experts to fuse"
    elif system.family != FUSED_EXPERT_MLP_FAMILY:
        why = f"the CuTe DSL MoE kernels run on {FUSED_EXPERT_MLP_FAMILY} GPUs, not {system.device_name}"
    elif bytes_per_element(precision) >= 2.0:
        why = f"the CuTe DSL MoE kernels take 8- or 4-bit weights (fp8, nvfp4), not {precision.value}"
    if why:
        raise ClusterSimError(
            f"fused_expert_mlp: {why}; drop it (the engine's default MoE kernels)",
            field="fused_expert_mlp",
            value=True,
        )
