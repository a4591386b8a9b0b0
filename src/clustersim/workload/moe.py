"""A mixture-of-experts block's routing: how many experts, how many per token, group-limited routing, and the
latent width its routed experts work in."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, Strict, model_validator

# Counts and switches are strict: a TOML ``layers = true`` (or ``"32"``, ``32.0``) is refused, not read as 1 (32).
Count = Annotated[int, Strict()]
Switch = Annotated[bool, Strict()]


class MoE(BaseModel):
    """Mixture of experts in every layer's MLP."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    experts: Count = Field(gt=0, description="Routed experts per layer.")
    top_k: Count = Field(gt=0, description="Routed experts each token goes to.")
    shared_experts: Count = Field(default=0, ge=0, description="Experts every token goes to.")
    expert_ffn_hidden: Count | None = Field(default=None, gt=0, description="Expert MLP width (default: ffn_hidden).")
    capacity_factor: float = Field(default=1.0, gt=0, le=16, description="Token slots per expert / fair share.")
    groups: Count = Field(default=1, gt=0, description="Expert groups of group-limited routing (DeepSeek n_group).")
    group_top_k: Count | None = Field(default=None, gt=0, description="Groups a token's experts keep to (None: all).")
    latent: Count | None = Field(
        default=None,
        gt=0,
        description="Width the routed experts read and write (a latent MoE's moe_latent_size; None: the hidden size).",
    )

    @model_validator(mode="after")
    def _top_k_fits(self) -> Self:
        reachable = (self.group_top_k or self.groups) * self.experts // self.groups  # experts a token may reach
        if self.experts % self.groups or (self.group_top_k or 0) > self.groups:
            raise ValueError(f"groups {self.groups} must divide experts {self.experts}, group_top_k at most groups")
        if self.top_k > reachable:
            raise ValueError(f"top_k {self.top_k} exceeds the {reachable} experts a token may reach")
        return self

    def latent_projection_params(self, hidden: int, bias: bool) -> int:
        """The two projections of a latent MoE around its routed experts (hidden to latent before the dispatch,
        back after the combine: Megatron-Core's fc1_latent_proj and fc2_latent_proj), with their biases where the
        model has them; 0 without a latent width."""
        if self.latent is None:
            return 0
        return 2 * hidden * self.latent + ((self.latent + hidden) if bias else 0)
