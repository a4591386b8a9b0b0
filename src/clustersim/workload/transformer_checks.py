"""The rules a transformer's optional extensions must keep together (each error names the field and the rule)."""

from __future__ import annotations

from typing import Any

from clustersim.workload.block_parts import FfnType, Position


def check_extensions(model: Any) -> None:
    """Raise ``ValueError`` naming the first extension field of ``model`` (a ``Transformer`` being validated; typed
    loosely so that this module does not import the one that calls it) that breaks its rule."""
    if model.max_context_tokens is not None and model.seq_len > model.max_context_tokens:
        raise ValueError(f"seq_len {model.seq_len} exceeds max_context_tokens {model.max_context_tokens}")
    if model.window_layers and not model.sliding_window:
        raise ValueError(f"window_layers {model.window_layers} needs a sliding_window")
    if (model.window_layers or 0) > model.layers:
        raise ValueError(f"window_layers {model.window_layers} exceeds layers {model.layers}")
    if model.quantization is not None and model.quantization.experts_only and model.moe is None:
        raise ValueError("quantization.experts_only needs a MoE model (its routed experts are what it stores)")
    if model.dense_layers and (model.moe is None or model.dense_layers >= model.layers):
        raise ValueError(f"dense_layers {model.dense_layers} needs a MoE model with more layers than that")
    if model.moe_layer_step > 1 and (model.moe is None or model.dense_layers or model.moe_layer_step > model.layers):
        rule = "a MoE model without dense_layers and with at least that many layers"
        raise ValueError(f"moe_layer_step {model.moe_layer_step} needs {rule}")
    if model.mla is not None:
        if model.kv_heads != model.heads:
            raise ValueError(f"latent attention has a key/value head per query head, not kv_heads {model.kv_heads}")
        if model.mla.rope_head_dim >= model.head_dim:
            raise ValueError(f"mla.rope_head_dim {model.mla.rope_head_dim} must be below head_dim {model.head_dim}")
        if model.qkv_bias or model.linear_bias or model.attention_gate:
            raise ValueError("linear biases or an output gate with latent attention are not modelled")
    if model.clamped_glu and model.ffn_type is FfnType.GELU:
        raise ValueError("clamped_glu needs a gated MLP (ffn_type swiglu or geglu), not gelu")
    if model.rope_concentration != 1.0 and model.position is not Position.ROTARY:
        raise ValueError(f"rope_concentration {model.rope_concentration} needs rotary positions")
    linear = model.linear_attention
    if linear is not None:
        if linear.layers >= model.layers:
            rule = f"must leave at least one full-attention layer of the {model.layers}"
            raise ValueError(f"linear_attention.layers {linear.layers} {rule}")
        if model.mla is not None or model.sliding_window:
            raise ValueError("linear_attention beside latent attention or a sliding window is not modelled")
        if linear.value_heads % linear.key_heads:
            heads = f"linear_attention.value_heads {linear.value_heads}"
            raise ValueError(f"{heads} is not a multiple of key_heads {linear.key_heads}")
    if model.mlp_free_layers:
        if model.mlp_free_layers >= model.layers:
            rule = f"must leave an MLP in at least one of the {model.layers} layers"
            raise ValueError(f"mlp_free_layers {model.mlp_free_layers} {rule}")
        if model.dense_layers or model.moe_layer_step > 1 or model.layer_norms != 2:
            rule = "needs layer_norms 2 and neither dense_layers nor moe_layer_step (a mixer-only layer drops one norm)"
            raise ValueError(f"mlp_free_layers {model.mlp_free_layers} {rule}")
