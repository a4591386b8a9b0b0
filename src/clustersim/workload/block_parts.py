"""The parts a transformer block is made of: its MLP kind, its normalization, its position encoding and
multi-head latent attention (see ``clustersim.workload.transformer``)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from clustersim.workload.moe import Count


class FfnType(StrEnum):
    """The MLP: ``gelu`` (up and down, 2 matrices, any element-wise activation), or a gated MLP of 3
    matrices (gate, up and down): ``swiglu`` (SiLU gate, Llama) or ``geglu`` (GELU gate, Gemma)."""

    GELU = "gelu"
    SWIGLU = "swiglu"
    GEGLU = "geglu"

    @property
    def num_matrices(self) -> int:
        """Weight matrices of one MLP."""
        return 2 if self is FfnType.GELU else 3


class Norm(StrEnum):
    """The normalization: LayerNorm (weight and bias) or RMSNorm (weight only)."""

    LAYERNORM = "layernorm"
    RMSNORM = "rmsnorm"


class Position(StrEnum):
    """Position encoding: a learned table (GPT), rotary (no parameters), or none (Nemotron-H and Nemotron 3, whose
    Mamba-2 layers carry the order: Megatron-Bridge's providers set position_embedding_type "none")."""

    LEARNED = "learned"
    ROTARY = "rotary"
    NONE = "none"


class MLA(BaseModel):
    """Multi-head latent attention (DeepSeek-V2/V3). Per layer: queries ``h -> q_lora_rank -> heads x
    head_dim`` (``h -> heads x head_dim`` without a query rank); keys and values ``h -> kv_lora_rank +
    rope_head_dim``, then ``kv_lora_rank -> heads x (head_dim - rope_head_dim + v_head_dim)``; the
    output ``heads x v_head_dim -> h``; an RMSNorm on each latent. ``head_dim`` of the model is the
    query/key head width, its rotary part included."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kv_lora_rank: Count = Field(gt=0, description="Width of the compressed key/value latent.")
    rope_head_dim: Count = Field(gt=0, description="Width of the rotary key, shared by all heads (part of head_dim).")
    v_head_dim: Count = Field(gt=0, description="Width of one value head (the attention output is heads x v_head_dim).")
    q_lora_rank: Count = Field(default=0, ge=0, description="Width of the compressed query; 0 = full-rank projection.")
