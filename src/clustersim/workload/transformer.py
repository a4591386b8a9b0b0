"""A decoder-only transformer: its shape, parameter count and FLOPs per token.

Conventions (see ../shared/reference/prior-art.md, "FLOPs per iteration"):

* a matrix multiply of an ``m x k`` by a ``k x n`` matrix is ``2 m k n`` FLOPs;
* **model FLOPs** per token are the forward and backward passes (``x 3``) of every matrix multiply
  with a weight (``2 x`` active matmul parameters), the logits included, plus the two attention
  matmuls (scores and context) over the full sequence, ``4 s d_attn`` per layer, as Megatron-LM,
  NeMo and the MFU figures of the papers count them (no causal halving). For a GPT with a 4h FFN
  and an untied or tied vocab this reproduces ``72 B s l h^2 (1 + s/(6h) + V/(12 l h))`` exactly.
* **hardware FLOPs** add the forward work that activation recompute repeats.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from clustersim.errors import ClusterSimError, validation_problems


class FfnType(StrEnum):
    """The MLP: ``gelu`` (up and down, 2 matrices) or ``swiglu`` (gate, up and down, 3 matrices)."""

    GELU = "gelu"
    SWIGLU = "swiglu"

    @property
    def num_matrices(self) -> int:
        """Weight matrices of one MLP."""
        return 2 if self is FfnType.GELU else 3


class Norm(StrEnum):
    """The normalization: LayerNorm (weight and bias) or RMSNorm (weight only)."""

    LAYERNORM = "layernorm"
    RMSNORM = "rmsnorm"


class Position(StrEnum):
    """Position encoding: a learned table (GPT) or rotary (no parameters)."""

    LEARNED = "learned"
    ROTARY = "rotary"


class MoE(BaseModel):
    """Mixture of experts in every layer's MLP."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    experts: int = Field(gt=0, description="Routed experts per layer.")
    top_k: int = Field(gt=0, description="Routed experts each token goes to.")
    shared_experts: int = Field(default=0, ge=0, description="Experts every token goes to.")
    expert_ffn_hidden: int | None = Field(default=None, gt=0, description="Expert MLP width (default: ffn_hidden).")
    capacity_factor: float = Field(default=1.0, gt=0, le=16, description="Token slots per expert / fair share.")

    @model_validator(mode="after")
    def _top_k_fits(self) -> Self:
        if self.top_k > self.experts:
            raise ValueError(f"top_k {self.top_k} exceeds experts {self.experts}")
        return self


class Transformer(BaseModel):
    """A decoder-only transformer. Defaults follow the FFN type: ``gelu`` models are GPT-style
    (biases, LayerNorm, learned positions, tied embeddings), ``swiglu`` models Llama-style (no
    biases, RMSNorm, rotary, untied)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(default="custom", description="Model id.")
    layers: int = Field(gt=0, le=100_000, description="Transformer blocks.")
    hidden: int = Field(gt=0, le=10_000_000, description="Model width h.")
    ffn_hidden: int = Field(gt=0, description="MLP inner width (per expert for MoE).")
    heads: int = Field(gt=0, description="Attention (query) heads.")
    kv_heads: int = Field(default=0, ge=0, description="Key/value heads (GQA/MQA); 0 = heads.")
    head_dim: int = Field(default=0, ge=0, description="Width of one head; 0 = hidden / heads.")
    vocab: int = Field(gt=0, description="Vocabulary size (padded where the source pads).")
    seq_len: int = Field(default=2048, gt=0, description="Default training sequence length, tokens.")
    ffn_type: FfnType = Field(default=FfnType.GELU, description="MLP kind.")
    norm: Norm | None = Field(default=None, description="Normalization; default by ffn_type.")
    position: Position | None = Field(default=None, description="Position encoding; default by ffn_type.")
    linear_bias: bool | None = Field(default=None, description="Biases on the linear layers; default by ffn_type.")
    tied_embeddings: bool | None = Field(default=None, description="Logits share the embedding; default by ffn_type.")
    moe: MoE | None = Field(default=None, description="Mixture of experts, if any.")

    @model_validator(mode="after")
    def _resolve(self) -> Self:
        gpt = self.ffn_type is FfnType.GELU
        resolved: dict[str, Any] = {}
        if self.kv_heads == 0:
            resolved["kv_heads"] = self.heads
        if self.head_dim == 0:
            if self.hidden % self.heads:
                raise ValueError(f"hidden {self.hidden} is not divisible by heads {self.heads}; give head_dim")
            resolved["head_dim"] = self.hidden // self.heads
        if self.norm is None:
            resolved["norm"] = Norm.LAYERNORM if gpt else Norm.RMSNORM
        if self.position is None:
            resolved["position"] = Position.LEARNED if gpt else Position.ROTARY
        if self.linear_bias is None:
            resolved["linear_bias"] = gpt
        if self.tied_embeddings is None:
            resolved["tied_embeddings"] = gpt
        for key, value in resolved.items():
            object.__setattr__(self, key, value)
        if self.heads % self.kv_heads:
            raise ValueError(f"heads {self.heads} is not a multiple of kv_heads {self.kv_heads}")
        return self

    # ---- shape --------------------------------------------------------------------------------
    @property
    def q_width(self) -> int:
        """Width of the queries (and of the attention output): heads x head_dim."""
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """Width of the keys (and of the values): kv_heads x head_dim."""
        return self.kv_heads * self.head_dim

    @property
    def expert_ffn(self) -> int:
        """MLP width of one expert (the dense MLP width without MoE)."""
        return self.moe.expert_ffn_hidden or self.ffn_hidden if self.moe else self.ffn_hidden

    @property
    def active_mlps(self) -> int:
        """MLPs a token goes through per layer: 1 dense, or top_k + shared experts."""
        return self.moe.top_k + self.moe.shared_experts if self.moe else 1

    @property
    def total_mlps(self) -> int:
        """MLPs held per layer: 1 dense, or experts + shared experts."""
        return self.moe.experts + self.moe.shared_experts if self.moe else 1

    # ---- parameters ---------------------------------------------------------------------------
    def attention_matmul_params(self) -> int:
        """The weight matrices of one layer's Q, K, V and output projections (no biases)."""
        return self.hidden * (self.q_width + 2 * self.kv_width) + self.q_width * self.hidden

    def attention_params(self) -> int:
        """Q, K, V and output projections of one layer (with biases where the model has them)."""
        biases = (self.q_width + 2 * self.kv_width + self.hidden) if self.linear_bias else 0
        return self.attention_matmul_params() + biases

    def mlp_matmul_params(self) -> int:
        """The weight matrices of one MLP (one expert) of one layer (no biases)."""
        return self.ffn_type.num_matrices * self.hidden * self.expert_ffn

    def mlp_params(self) -> int:
        """One MLP (one expert) of one layer."""
        biases = ((self.ffn_type.num_matrices - 1) * self.expert_ffn + self.hidden) if self.linear_bias else 0
        return self.mlp_matmul_params() + biases

    def router_params(self) -> int:
        """The MoE router of one layer (0 for a dense model)."""
        return self.hidden * self.moe.experts if self.moe else 0

    def norm_params(self) -> int:
        """One normalization layer."""
        return (2 if self.norm is Norm.LAYERNORM else 1) * self.hidden

    def layer_params(self) -> int:
        """All parameters of one transformer block."""
        return (
            self.attention_params()
            + self.total_mlps * self.mlp_params()
            + self.router_params()
            + 2 * self.norm_params()
        )

    def embedding_params(self) -> int:
        """Token embedding, learned positions, and the output matrix when it is not tied."""
        positions = self.seq_len * self.hidden if self.position is Position.LEARNED else 0
        output = 0 if self.tied_embeddings else self.vocab * self.hidden
        return self.vocab * self.hidden + positions + output

    def num_params(self) -> int:
        """Total parameters (the final norm included)."""
        return self.layers * self.layer_params() + self.embedding_params() + self.norm_params()

    def active_params(self) -> int:
        """Parameters a token uses (routed experts counted top_k times)."""
        inactive = (self.total_mlps - self.active_mlps) * self.mlp_params()
        return self.num_params() - self.layers * inactive

    # ---- FLOPs --------------------------------------------------------------------------------
    def matmul_params_per_token(self) -> int:
        """Weights a token multiplies: per layer QKV, output, active MLPs, router; then the logits."""
        mlp = self.active_mlps * self.mlp_matmul_params()
        return self.layers * (self.attention_matmul_params() + mlp + self.router_params()) + self.vocab * self.hidden

    def attention_flops_per_token(self, seq_len: int | None = None) -> float:
        """Forward FLOPs of the attention scores and context of one token, all layers (full s)."""
        s = seq_len or self.seq_len
        return float(self.layers * 4 * s * self.q_width)

    def forward_flops_per_token(self, seq_len: int | None = None) -> float:
        """Forward-pass matmul FLOPs of one token."""
        return 2.0 * self.matmul_params_per_token() + self.attention_flops_per_token(seq_len)

    def model_flops_per_token(self, seq_len: int | None = None) -> float:
        """Training model FLOPs per token: forward + backward (3 x forward), no recompute."""
        return 3.0 * self.forward_flops_per_token(seq_len)


def transformer_from_mapping(data: dict[str, Any], where: str = "model") -> Transformer:
    """A ``Transformer`` from plain data; ``ClusterSimError`` naming the field, value and rule."""
    try:
        return Transformer.model_validate(data)
    except ValidationError as exc:
        problems = validation_problems(exc.errors())
        raise ClusterSimError(f"{where}: {problems}") from None
