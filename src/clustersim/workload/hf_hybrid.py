"""The Hugging Face reader of Qwen3-Next (``model_type`` ``qwen3_next``), a Gated DeltaNet hybrid.

Fields read beyond a Qwen3-MoE's (transformers ``Qwen3NextConfig``): ``layer_types`` (each ``linear_attention`` or
``full_attention``), or without it ``full_attention_interval`` (default 4: layer ``i`` attends when
``(i + 1) % 4 == 0``); ``linear_num_key_heads``, ``linear_num_value_heads``, ``linear_key_head_dim``,
``linear_value_head_dim`` and ``linear_conv_kernel_dim``; the shared expert's ``shared_expert_intermediate_size``
(a multiple of ``moe_intermediate_size``). Every attention layer gates its output (``Qwen3NextAttention``'s
query projection is twice the queries' width). Refused: ``decoder_sparse_step`` other than 1 and
``mlp_only_layers`` (dense layers between the hybrid's MoE blocks), which no published Qwen3-Next sets.
"""

from __future__ import annotations

from typing import Any

from clustersim.workload.hf_fields import SILU, Config, no_extra_biases, rotary_fields

LAYER_KINDS = ("linear_attention", "full_attention")


def qwen3_next(cfg: Config) -> dict[str, Any]:
    """The fields of a Qwen3-Next config."""
    cfg.activation(("hidden_act",), "silu", SILU)
    no_extra_biases(cfg)
    fields = rotary_fields(cfg, "swiglu", tied=False, head_dim=256)
    layers = fields["layers"]
    if cfg.count("decoder_sparse_step", 1) != 1:
        raise cfg.fail("decoder_sparse_step", cfg.raw("decoder_sparse_step"), "not modelled unless 1 (every layer MoE)")
    if cfg.raw("mlp_only_layers"):
        raise cfg.fail("mlp_only_layers", cfg.raw("mlp_only_layers"), "not modelled in a hybrid (give none)")
    expert = cfg.count("moe_intermediate_size")
    shared = cfg.count("shared_expert_intermediate_size", 0, minimum=0)
    if shared % expert:
        rule = f"not modelled unless a multiple of moe_intermediate_size {expert}"
        raise cfg.fail("shared_expert_intermediate_size", shared, rule)
    experts = {"experts": cfg.count("num_experts"), "top_k": cfg.count("num_experts_per_tok")}
    fields.update(
        ffn_hidden=expert,
        qk_norm=True,
        attention_gate=True,
        moe=experts | {"shared_experts": shared // expert},
        linear_attention={
            "layers": _linear_layers(cfg, layers),
            "key_heads": cfg.count("linear_num_key_heads"),
            "value_heads": cfg.count("linear_num_value_heads"),
            "key_head_dim": cfg.count("linear_key_head_dim", 128),
            "value_head_dim": cfg.count("linear_value_head_dim", 128),
            "conv_kernel": cfg.count("linear_conv_kernel_dim", 4),
        },
    )
    return fields


def _linear_layers(cfg: Config, layers: int) -> int:
    """Gated DeltaNet layers: by ``layer_types``, else all but every ``full_attention_interval``-th."""
    types = cfg.raw("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers or any(t not in LAYER_KINDS for t in types):
            raise cfg.fail("layer_types", types, f"a list of {layers} entries, each one of {', '.join(LAYER_KINDS)}")
        return types.count("linear_attention")
    interval = cfg.count("full_attention_interval", 4)
    return layers - layers // interval
