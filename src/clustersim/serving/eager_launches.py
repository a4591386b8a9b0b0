"""Host-bound steps: a step an engine runs eagerly takes at least the host's time to launch its kernels.

The Python engines (SGLang, vLLM, TensorRT-LLM's PyTorch backend) capture CUDA graphs of their decode steps
only; a step that carries prompt tokens runs eagerly, each kernel launched by the host through PyTorch (SGLang's
``--enable-piecewise-cuda-graph`` is off by default; vLLM V1 replays piecewise graphs of the layers between the
attention calls for steps of at most its largest capture size, 512 tokens, and runs larger steps eagerly:
``CompilationConfig.max_cudagraph_capture_size``; TensorRT-LLM's ``cuda_graph_runner.py`` pads a step of decoders
alone and runs a context step eagerly). The GPU waits when its kernels are shorter than their launches: a prompt of
a thousand tokens through a 61-layer MoE model is host-bound, a prompt of eight thousand is not. So an eager step
takes the larger of its device time and its launches' host time (the device runs each kernel as the host queues
it): ``eager_floor_s``, with the launches counted per layer by ``kernels_per_layer`` and one host time per launch
(``EngineProfile.eager_launch_s``). Only SGLang's profile sets one (``engines.toml`` gives its evidence and why
vLLM's and TensorRT-LLM's do not); a user's profile may set its own.

The count follows the model's blocks as the engines write them (one launch per GEMM, norm, rotary embedding,
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

from clustersim.serving.formats import ServingPrecision, bytes_per_element
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


def kernels_per_layer(model: Transformer, precision: ServingPrecision, tp: int) -> float:
    """Kernels an eager step launches per layer of ``model`` (the mean over its layers; see the module's count)."""
    quantized = bytes_per_element(precision) < 2.0
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
    comm = TENSOR_PARALLEL if tp > 1 else 0
    halves = (1 + model.mlp_share) / 2  # a layer with no MLP: one norm and one all-reduce of two
    return (NORMS + comm) * halves + attention + (attention_gemms if quantized else 0) + mlp


def eager_floor_s(model: Transformer, layers: float, precision: ServingPrecision, tp: int, launch_s: float) -> float:
    """The host's time to launch an eager step's kernels over ``layers`` layers at ``launch_s`` a launch."""
    return layers * kernels_per_layer(model, precision, tp) * launch_s
