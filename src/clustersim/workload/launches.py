"""Kernel launches per layer: how many kernels a framework launches for one layer of a model, from its blocks.

Host-side costs that grow with the launches (an eager step's launch floor when serving,
``clustersim.serving.eager_launches``; a graph-less training step's wait for its host,
``clustersim.training.host_launches``) count them here, one definition for both.

The count follows the model's blocks as the frameworks write them (one launch per GEMM, norm, rotary embedding,
cache write, attention call, activation and all-reduce; the counts are this module's, a prior: fused kernels lower
them, a framework's extra copies raise them):

* two norms (before attention, and the residual add fused with the norm before the MLP);
* attention: the QKV GEMM, the rotary embedding, the KV-cache write, the attention kernel, the output GEMM (5);
  a per-head query/key norm (Qwen3) one more; latent attention (MLA): the query GEMM (two and a norm with a query
  rank), the latent GEMM and its norm, the rotary embedding, the cache write, the key/value up-projection, the
  attention kernel and the output GEMM (8, 10 with a query rank);
  a gated attention output (Qwen3-Next) one more, its sigmoid and product;
* a Gated DeltaNet layer (``clustersim.workload.linear_attention``) in place of attention: its two input GEMMs (the
  queries, keys, values and gate; the decay and step), their split, the causal convolution, the gating, the two
  L2 norms of the queries and keys, flash-linear-attention's six chunked delta-rule kernels (chunk_local_cumsum,
  chunk_scaled_dot_kkt, solve_tril, recompute_w_u, chunk_gated_delta_rule_fwd_h, chunk_fwd_o), the gated norm and
  the output GEMM (15, three of them GEMMs); a Mamba-2 layer: its input GEMM, the causal convolution, mamba_ssm's
  five chunked-scan kernels (``mamba_chunk_scan_combined``: chunk_cumsum, chunk_state, state_passing, bmm_chunk,
  chunk_scan; state-spaces/mamba mamba_ssm/ops/triton/ssd_combined.py), the gated norm and the output GEMM (9, two
  of them GEMMs); the count is the mean over the layer kinds;
* a dense MLP: the gate/up GEMM, the activation, the down GEMM (3);
* a MoE MLP: the router GEMM, the top-k selection, the tokens' sort by expert, the two grouped GEMMs, the
  activation and the weighted sum (7), and a shared expert's three; a latent MoE's two projections (Nemotron 3
  Super) two GEMMs more;
* two all-reduces where the layer is tensor parallel;
* a layer with no MLP (``mlp_free_layers``, Nemotron-H) launches one norm and one all-reduce fewer and no MLP;
* an 8- or 4-bit GEMM quantizes its input first: one launch per GEMM on quantized weights (the router's stays 16
  bits).
"""

from __future__ import annotations

from clustersim.workload.transformer import Transformer

NORMS = 2
ATTENTION = 5  # QKV GEMM, rotary, cache write, attention, output GEMM
ATTENTION_GEMMS = 2
MLA_ATTENTION = 8  # query GEMM, latent GEMM, latent norm, rotary, cache write, up-projection, attention, output GEMM
MLA_GEMMS = 4
MLA_QUERY_RANK = 2  # the query's second GEMM and its norm
GATED_DELTANET = 15  # two input GEMMs, split, convolution, gating, two L2 norms, six delta-rule kernels, norm, output
GATED_DELTANET_GEMMS = 3
MAMBA2 = 9  # input GEMM, convolution, five chunked-scan kernels, gated norm, output GEMM
MAMBA2_GEMMS = 2
DENSE_MLP = 3  # gate/up GEMM, activation, down GEMM
DENSE_MLP_GEMMS = 2
MOE_MLP = 7  # router GEMM, top-k, sort by expert, two grouped GEMMs, activation, weighted sum
MOE_MLP_GEMMS = 2  # the grouped GEMMs on quantized weights (the router's stays 16-bit)
SHARED_EXPERT = 3
LATENT_PROJECTIONS = 2  # a latent MoE's GEMMs down to its latent width and back
TENSOR_PARALLEL = 2  # all-reduces after attention and after the MLP


def layer_launches(model: Transformer, *, quantized: bool, tensor_parallel: bool) -> float:
    """Kernels launched per layer of ``model`` (the mean over its layers; see the module's count): ``quantized``, its
    GEMMs on 8- or 4-bit weights quantize their inputs first; ``tensor_parallel``, two all-reduces a layer."""
    attention: float
    attention_gemms: float
    if model.mla is not None:
        attention = MLA_ATTENTION + (MLA_QUERY_RANK if model.mla.q_lora_rank else 0)
        attention_gemms = MLA_GEMMS + (1 if model.mla.q_lora_rank else 0)
    else:
        attention = ATTENTION + (1 if model.qk_norm else 0) + (1 if model.attention_gate else 0)
        attention_gemms = ATTENTION_GEMMS
    mamba2 = model.linear_attention is not None and model.linear_attention.mamba2
    attention = model.mixer_mean(attention, MAMBA2 if mamba2 else GATED_DELTANET)  # the mean over the layer kinds
    attention_gemms = model.mixer_mean(attention_gemms, MAMBA2_GEMMS if mamba2 else GATED_DELTANET_GEMMS)
    dense = DENSE_MLP + (DENSE_MLP_GEMMS if quantized else 0)
    mlp = dense * model.mlp_share
    if model.moe is not None:
        shared = model.moe.shared_experts
        latent = LATENT_PROJECTIONS if model.moe.latent else 0
        gemms = MOE_MLP_GEMMS + shared * DENSE_MLP_GEMMS + latent
        moe = MOE_MLP + shared * SHARED_EXPERT + latent + (gemms if quantized else 0)
        mlp = (model.moe_layers * moe + model.dense_mlp_layers * dense) / model.layers
    comm = TENSOR_PARALLEL if tensor_parallel else 0
    halves = (1 + model.mlp_share) / 2  # a layer with no MLP: one norm and one all-reduce of two
    return (NORMS + comm) * halves + attention + (attention_gemms if quantized else 0) + mlp
