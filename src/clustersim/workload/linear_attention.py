"""Recurrent-state token mixers that hybrid models put in place of most attention layers: Gated DeltaNet and Mamba-2.

Qwen3-Next and Qwen3.5 make three of every four layers a Gated DeltaNet (Yang, Kautz and Hatamizadeh, "Gated
Delta Networks", arXiv 2412.06464) and the fourth a full (gated) attention layer. A Gated DeltaNet layer keeps, per
sequence and value head, a ``key_head_dim x value_head_dim`` state that each token decays, corrects and reads
(the delta rule), so it holds no cache that grows with the sequence and its work per token does not depend on
the sequence's length.

Per layer and token (the counts of Megatron-LM's ``gdn_layer_flops``, NVIDIA/Megatron-LM @d98e8a64
``megatron/training/training.py``, and the weights of Hugging Face's ``Qwen3NextGatedDeltaNet``):

* an input projection ``h -> 2 k + 2 v + 2 n_v`` (queries and keys of ``k = key_heads x key_head_dim``, values
  and the output gate of ``v = value_heads x value_head_dim``, and a decay and a step size per value head);
* a depthwise causal convolution of ``conv_kernel`` taps over the ``2 k + v`` query, key and value channels;
* the delta rule, four ``key_head_dim x value_head_dim`` products per value head (Megatron-LM's ``K K^T``,
  ``V K^T``, the state's correction and ``S q``), priced as FLOPs beside the projections;
* a gated RMSNorm over each value head and the output projection ``v -> h``.

Its weights beyond the projections are the convolution (``(2 k + v) x conv_kernel``), two per value head (the
decay's ``A_log`` and ``dt_bias``) and the norm's ``value_head_dim``. What a sequence holds between steps
is the state of every value head (``ssm_state_elements``) and the convolution's last ``conv_kernel - 1`` inputs
(``conv_state_elements``).

Mamba-2 (Dao and Gu, "Transformers are SSMs", arXiv 2405.21060; NVIDIA's Nemotron-H and Nemotron 3 hybrids) has
the same shape with other names, so one class holds both (``kind``): its ``n_groups`` B and C projections of
``d_state`` are the keys and queries (``key_heads x key_head_dim``), its heads of ``head_dim`` the value heads, its
``z`` the output gate. What differs, per Megatron-Core's ``MambaMixer`` and Hugging Face's ``NemotronHMamba2Mixer``:

* one step size per head in the input projection, not a decay and a step size;
* a bias on the convolution, three weights per head (``A_log``, ``D``, ``dt_bias``) and a gated RMSNorm over the
  whole inner width (``value_width``), not one head's;
* the scan: Megatron-LM's ``mamba_layer_flops`` counts ``7 x d_inner x d_state`` FLOPs per token (it takes
  ``d_inner = 2 h``; here the layer's own ``value_width``).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from clustersim.workload.moe import Count

DELTA_RULE_PRODUCTS = 4  # Megatron-LM's count of state-sized products per value head and token
MAMBA2_SCAN_FLOPS = 7  # Megatron-LM's count of FLOPs per inner channel, state element and token of the scan


class StateMixer(StrEnum):
    """Which recurrent mixer: a Gated DeltaNet (Qwen3-Next, Qwen3.5) or Mamba-2 (Nemotron-H, Nemotron 3)."""

    GATED_DELTANET = "gated_deltanet"
    MAMBA2 = "mamba2"

    @property
    def label(self) -> str:
        """The mixer's name in prose: ``Gated DeltaNet`` or ``Mamba-2``."""
        return "Mamba-2" if self is StateMixer.MAMBA2 else "Gated DeltaNet"


class LinearAttention(BaseModel):
    """The recurrent-state layers of a hybrid model: which mixer, how many, and their heads."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: StateMixer = Field(default=StateMixer.GATED_DELTANET, description="gated_deltanet or mamba2.")
    layers: Count = Field(gt=0, description="Layers whose token mixer is recurrent (the rest full attention).")
    key_heads: Count = Field(gt=0, description="Query and key heads of one layer (Mamba-2: its groups).")
    value_heads: Count = Field(gt=0, description="Value heads of one layer, each with its own state (Mamba-2: heads).")
    key_head_dim: Count = Field(default=128, gt=0, description="Width of one query or key head (Mamba-2: d_state).")
    value_head_dim: Count = Field(default=128, gt=0, description="Width of one value head (Mamba-2: head_dim).")
    conv_kernel: Count = Field(default=4, gt=0, le=64, description="Taps of the causal convolution.")
    state_bytes: float | None = Field(
        default=None,
        ge=1,
        le=4,
        description="Bytes per element of the recurrent state the checkpoint asks an engine to keep (Nemotron-H: "
        "mamba_ssm_cache_dtype float32, 4); absent: the engine's own width.",
    )

    @property
    def mamba2(self) -> bool:
        """Whether the layers are Mamba-2's."""
        return self.kind is StateMixer.MAMBA2

    @property
    def chunk_tokens(self) -> int:
        """Tokens of the chunks the training and prefill kernels work in (attending within a chunk, carrying the
        state between chunks): flash-linear-attention's chunk_gated_delta_rule, which Megatron-LM, vLLM and SGLang
        call, uses 64 (fla-org/flash-linear-attention fla/ops/gated_delta_rule/chunk.py, chunk_size 64); Megatron-Core's
        MambaMixer runs mamba_ssm's chunked scan at 128 (NVIDIA/Megatron-LM @d98e8a64
        megatron/core/ssm/mamba_mixer.py, chunk_size=128)."""
        return 128 if self.mamba2 else 64

    @property
    def key_width(self) -> int:
        """Width of the queries (and of the keys): key_heads x key_head_dim."""
        return self.key_heads * self.key_head_dim

    @property
    def value_width(self) -> int:
        """Width of the values (and of the output gate): value_heads x value_head_dim."""
        return self.value_heads * self.value_head_dim

    @property
    def conv_channels(self) -> int:
        """Channels the convolution runs over: the queries, keys and values."""
        return 2 * self.key_width + self.value_width

    def input_matmul_params(self, hidden: int) -> int:
        """The input projection: queries, keys, values, output gate, and each value head's decay and step (Mamba-2:
        its step alone)."""
        per_head = 1 if self.mamba2 else 2
        return hidden * (2 * self.key_width + 2 * self.value_width + per_head * self.value_heads)

    def output_matmul_params(self, hidden: int) -> int:
        """The output projection ``value_width -> hidden``."""
        return self.value_width * hidden

    def params(self, hidden: int) -> int:
        """One layer's weights: both projections, the convolution, the decay's two per value head and the norm
        over one head (Mamba-2: the convolution's bias, three per head and the norm over the inner width)."""
        projections = self.input_matmul_params(hidden) + self.output_matmul_params(hidden)
        conv = self.conv_channels * self.conv_kernel
        if self.mamba2:
            return projections + conv + self.conv_channels + 3 * self.value_heads + self.value_width
        return projections + conv + 2 * self.value_heads + self.value_head_dim

    def mixing_flops_per_token(self) -> float:
        """Forward FLOPs of one token beyond the projections: the convolution and the delta rule (Mamba-2: the
        scan)."""
        conv = 2 * self.conv_kernel * self.conv_channels
        if self.mamba2:
            return float(conv + MAMBA2_SCAN_FLOPS * self.value_width * self.key_head_dim)
        delta = 2 * DELTA_RULE_PRODUCTS * self.value_heads * self.key_head_dim * self.value_head_dim
        return float(conv + delta)

    def ssm_state_elements(self) -> int:
        """Elements of one sequence's recurrent state in one layer: every value head's ``key x value`` matrix."""
        return self.value_heads * self.key_head_dim * self.value_head_dim

    def conv_state_elements(self) -> int:
        """Elements of one sequence's convolution state in one layer: its last ``conv_kernel - 1`` inputs."""
        return self.conv_channels * (self.conv_kernel - 1)
