"""How a serving engine holds a hybrid model's recurrent states beside its KV cache, and which engines serve them.

A Gated DeltaNet or Mamba-2 layer (``clustersim.workload.linear_attention``) keeps, per sequence, a state of every
value head (``key_head_dim x value_head_dim``) and the convolution's last inputs. Engines differ in two things:

* the state's width: vLLM keeps it in the model's 16 bits (``--mamba-ssm-cache-dtype auto``), SGLang in 32 bits
  unless the model's config or ``SGLANG_MAMBA_SSM_DTYPE`` says otherwise (sgl-project/sglang @02e208de
  python/sglang/srt/configs/mamba_utils.py ``mamba2_state_dtype``: "Default float32"; ServerArgs
  ``mamba_ssm_dtype: str = "float32"``); a checkpoint that asks for a width (``LinearAttention.state_bytes``:
  Nemotron-H's ``mamba_ssm_cache_dtype``, float32 where silent, which vLLM's ``NemotronHForCausalLMConfig`` applies)
  gets it from both (``clustersim.serving.memory.state_bytes_per_sequence``); the convolution's inputs are 16-bit
  in both;
* the pool: vLLM's hybrid KV cache gives a running request its state's blocks from the same pool as its tokens';
  SGLang splits the room first, ``r / (1 + r)`` of it to a pool of states and the rest to the KV cache
  (ServerArgs ``mamba_full_memory_ratio: float = 0.9``; model_runner's ``mamba_budget = total_rest_memory x ratio /
  (1 + ratio)``), so a sequence needs both a state slot and its tokens' room; and SGLang admits at most one running
  request per ``slots_per_request`` slots of the pool (model_runner ``init_memory``: ``max_num_reqs = min(max_num_reqs,
  max_mamba_cache_size // ratio)``; sgl-project/sglang @001ccef0
  python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py ``calculate_mamba_ratio``): 3 under the
  ``no_buffer`` radix cache (the live state and two prefix checkpoints), 5 under ``extra_buffer`` with the overlap
  scheduler (two ping-pong buffers more), to which the default strategy resolves for the hybrids that support it from
  0.5.15 (profiles ``sglang`` and ``sglang-v0-5``).

The GPU engines serve both hybrids (vLLM's and SGLang's ``qwen3_next`` and ``nemotron_h`` models, TensorRT-LLM's
PyTorch backend's); the Neuron engines serve neither: NxD Inference, under vLLM's Neuron plugin and Optimum Neuron,
has no recurrent model (aws-neuron/neuronx-distributed-inference ``src/neuronx_distributed_inference/models``: dbrx,
deepseek, glm4_moe, llama, llama4, minimax_m2, mixtral, phi3, qwen2, qwen3, qwen3_moe and vision and speech models),
and transformers-neuronx is out of support. So a hybrid on a Neuron engine is refused (``check_recurrent_engine``).
A GPU engine's releases from before these models (vLLM 0.6, SGLang 0.3) are not told apart.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from clustersim.errors import ClusterSimError
from clustersim.workload.transformer import Transformer

RECURRENT_ENGINES = ("tensorrt-llm", "vllm", "sglang")  # the frameworks that serve Gated DeltaNet and Mamba-2 layers


class StatePool(BaseModel):
    """An engine's recurrent states: their width and whether they have a pool of their own."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ssm_bytes: float = Field(
        2.0, ge=1, le=4, description="Bytes per element of each value head's state (2: 16-bit; SGLang 4: float32)."
    )
    memory_ratio: float | None = Field(
        None,
        gt=0,
        le=100,
        description="The states' pool over the KV cache's, as the room is split (SGLang's mamba_full_memory_ratio, "
        "0.9); absent: one pool for both (vLLM).",
    )
    slots_per_request: int = Field(
        1,
        ge=1,
        le=8,
        description="State slots the pool counts per running request when it caps them (SGLang: 3 under no_buffer, the "
        "live state and its radix cache's two checkpoints; 5 under extra_buffer); only with a pool of its own.",
    )


def check_recurrent_engine(model: Transformer, framework: str, engine: str) -> None:
    """Refuse a hybrid with recurrent layers on an engine whose framework serves none (``RECURRENT_ENGINES``)."""
    linear = model.linear_attention
    if linear is None or framework in RECURRENT_ENGINES:
        return
    raise ClusterSimError(
        f"engine: {engine} ({framework}) serves no {linear.kind.label} layers, which {model.name} has; engines that "
        f"do: {', '.join(RECURRENT_ENGINES)} (on GPUs)",
        field="engine",
        value=engine,
    )
