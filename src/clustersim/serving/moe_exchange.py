"""How the MoE layers of an attention-data-parallel replica move tokens between its ranks.

Each rank runs its own group's tokens through attention; each MoE layer must bring every token to the ranks
holding its experts and the experts' outputs back (``clustersim.serving.attention_dp``). Two ways:

* ``gather`` (TensorRT-LLM's default under ``enable_attention_dp``): the groups' tokens are all-gathered onto
  every rank and the experts' outputs reduce-scattered back, in 16 bits; every rank routes and permutes every
  token of the stage (``moe_token_layer_s`` on all of them).
* ``alltoall`` (``TRTLLM_MOE_ENABLE_ALLTOALL_WITHOUT_ALLGATHER=1``, the WIDEEP backend; SGLang's and vLLM's
  DeepEP all-to-all): each rank sends each of its tokens once to every rank holding one of its ``top_k``
  experts and receives the outputs back (dispatch and combine, 16 bits each). With ``R`` ranks each holding
  ``1/R`` of the experts, a token reaches ``R (1 - (1 - 1/R)^top_k)`` ranks on average, so a rank receives, and
  routes and permutes, that share of the stage's tokens over ``R``.

Both send the tokens in 16 bits and bring the outputs back in 16 bits, except where the engine quantizes first:
TensorRT-LLM's fused MoE quantizes an NVFP4 model's hidden states to NVFP4 (4-bit values and their block scales,
0.5625 bytes an element) before the attention-DP all-gather and before the all-to-all's dispatch, and brings the
outputs back in 16 bits (the reduce-scatter of the fused MoE's output, the all-to-all's combine):
``tensorrt_llm/_torch/modules/fused_moe.py`` @01503f55 ``forward_chunk`` (``fp4_quantize`` before ``allgather``
unless ``TLLM_DISABLE_FP4_ALLGATHER=1``; the post-quant all-to-all unless ``TRTLLM_MOE_POST_QUANT_ALLTOALLV=0``),
and ``tensorrt_llm/_torch/modules/fused_moe/fused_moe_cutlass.py`` @000a01de (``run_post_quant_allgather`` whenever
attention DP splits the tokens; the CuteDSL backend inherits it). An FP8 model with per-tensor scales is gathered in
FP8 there too, one with DeepSeek's block scales in 16 bits; the model does not tell the two apart and sends FP8 in
16 bits.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from clustersim.network.collectives import Op
from clustersim.serving.formats import BlockFp4, ServingPrecision, bytes_per_element
from clustersim.serving.memory import ACTIVATION_BYTES, stage_share
from clustersim.serving.serving_system import ServingSystem
from clustersim.workload.transformer import Transformer

FloatArray = npt.NDArray[np.float64]

QUANTIZED_DISPATCH_FRAMEWORKS = ("tensorrt-llm",)
"""Engines that send an NVFP4 model's tokens to its experts in NVFP4 (see the module)."""


def dispatch_bytes_per_element(precision: ServingPrecision, framework: str) -> float:
    """Bytes an element of a token takes on its way to the experts: NVFP4's (block scales included) where the engine
    quantizes before it sends (an NVFP4 model on TensorRT-LLM), 16 bits otherwise."""
    if precision is BlockFp4.NVFP4 and framework in QUANTIZED_DISPATCH_FRAMEWORKS:
        return bytes_per_element(BlockFp4.NVFP4)
    return ACTIVATION_BYTES


def ranks_reached(ranks: int, top_k: int) -> float:
    """Ranks a token's ``top_k`` experts sit on, on average, with the experts split evenly over ``ranks``."""
    return ranks * (1.0 - (1.0 - 1.0 / ranks) ** top_k)


def routed_token_share(model: Transformer, system: ServingSystem) -> float:
    """The share of the stage's tokens each rank routes and permutes in a MoE layer: all of them after a gather,
    the copies it receives under an all-to-all (1 without attention data parallel: a rank sees every token)."""
    if system.moe_exchange != "alltoall" or model.moe is None:
        return 1.0
    ranks = system.tp * system.attention_dp
    return ranks_reached(ranks, model.moe.top_k) / ranks


def exchange_s(
    model: Transformer, system: ServingSystem, tokens: FloatArray, dispatch_bytes: float = ACTIVATION_BYTES
) -> FloatArray:
    """Seconds per step a rank spends moving a stage of ``tokens`` tokens to the experts and back, over the MoE
    layers of one pipeline stage (0 without attention data parallel or MoE); ``dispatch_bytes``: an element's bytes
    on the way there (``dispatch_bytes_per_element``), 16 bits on the way back."""
    if system.attention_dp == 1 or system.ep_fabric is None or model.moe is None:
        return np.zeros_like(tokens)
    returned = model.expert_input * ACTIVATION_BYTES  # a token's bytes; a latent MoE exchanges its latent rows
    sent = model.expert_input * dispatch_bytes
    if system.moe_exchange == "alltoall":
        ranks = system.tp * system.attention_dp
        copies = (tokens / ranks * ranks_reached(ranks, model.moe.top_k)).ravel()  # its share's copies
        dispatch = system.cost.time_s(Op.ALLTOALL, copies * sent, system.ep_fabric)
        moved = dispatch + system.cost.time_s(Op.ALLTOALL, copies * returned, system.ep_fabric)  # and the combine
    else:
        stage_tokens = tokens.ravel()
        moved = system.cost.time_s(Op.ALL_GATHER, stage_tokens * sent, system.ep_fabric) + system.cost.time_s(
            Op.REDUCE_SCATTER, stage_tokens * returned, system.ep_fabric
        )
    layers = model.moe_layers * stage_share(model, system.pp)
    return np.asarray(layers * moved, dtype=np.float64).reshape(np.shape(tokens))
