"""Gated DeltaNet, the linear-attention token mixer that hybrid models put in place of most attention layers.

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
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from clustersim.workload.moe import Count

DELTA_RULE_PRODUCTS = 4  # Megatron-LM's count of state-sized products per value head and token


class LinearAttention(BaseModel):
    """Gated DeltaNet layers of a hybrid model: how many, and their heads."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    layers: Count = Field(gt=0, description="Layers whose token mixer is a Gated DeltaNet (the rest full attention).")
    key_heads: Count = Field(gt=0, description="Query and key heads of one layer.")
    value_heads: Count = Field(gt=0, description="Value heads of one layer (each with its own state).")
    key_head_dim: Count = Field(default=128, gt=0, description="Width of one query or key head.")
    value_head_dim: Count = Field(default=128, gt=0, description="Width of one value head.")
    conv_kernel: Count = Field(default=4, gt=0, le=64, description="Taps of the causal convolution.")

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
        """The input projection: queries, keys, values, output gate, and each value head's decay and step."""
        return hidden * (2 * self.key_width + 2 * self.value_width + 2 * self.value_heads)

    def output_matmul_params(self, hidden: int) -> int:
        """The output projection ``value_width -> hidden``."""
        return self.value_width * hidden

    def params(self, hidden: int) -> int:
        """One layer's weights: both projections, the convolution, the decay's two per value head and the norm."""
        projections = self.input_matmul_params(hidden) + self.output_matmul_params(hidden)
        return projections + self.conv_channels * self.conv_kernel + 2 * self.value_heads + self.value_head_dim

    def mixing_flops_per_token(self) -> float:
        """Forward FLOPs of one token beyond the projections: the convolution and the delta rule."""
        conv = 2 * self.conv_kernel * self.conv_channels
        delta = 2 * DELTA_RULE_PRODUCTS * self.value_heads * self.key_head_dim * self.value_head_dim
        return float(conv + delta)

    def ssm_state_elements(self) -> int:
        """Elements of one sequence's recurrent state in one layer: every value head's ``key x value`` matrix."""
        return self.value_heads * self.key_head_dim * self.value_head_dim

    def conv_state_elements(self) -> int:
        """Elements of one sequence's convolution state in one layer: its last ``conv_kernel - 1`` inputs."""
        return self.conv_channels * (self.conv_kernel - 1)
