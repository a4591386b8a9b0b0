"""The 2025 open MoE families of Hugging Face ``config.json`` (``gpt_oss``, ``glm4_moe``) and the DeepSeek-style
experts that DeepSeek-V2/V3, Kimi K2 (``kimi_k2``) and GLM-4.5 share.

* ``gpt_oss`` (gpt-oss-120b/20b; transformers ``GptOssConfig``): GQA of ``head_dim`` heads with biases on Q, K, V
  and the output and on every expert's gate/up and down projections (``linear_bias``; ``attention_bias`` must be
  true, as the experts keep theirs either way), ``num_local_experts`` SwiGLU experts of ``intermediate_size``,
  ``num_experts_per_tok`` a token (``experts_per_token``, the original checkpoint's name, must agree), no shared
  expert; ``layer_types`` (default: layers 0, 2, ... windowed) say which layers attend within ``sliding_window``.
  ``seq_len`` is ``initial_context_length``, the window the rotary positions were trained at before YaRN. Not
  counted, as in the zoo entries: the attention sinks (one logit per query head and layer, no matmul) and the
  router's bias (``num_local_experts`` per layer). The clamped SwiGLU (``swiglu_limit``) has a SwiGLU's three
  matrices (``clamped_glu``: only the element-wise work around them differs). The release's ``quantization_config``
  (``mxfp4`` on the experts, ``modules_to_not_convert`` the attention, router, embedding and output layer) is read as
  that checkpoint (``quantization.MXFP4_EXPERTS``: serving holds and reads the routed experts at 4.25 bits, the rest
  at 16; training refuses it, as every quantized checkpoint: the zoo's entries are the bf16 model that trains); an
  mxfp4 config that also converts those modules is refused. YaRN's ``rope_scaling`` gives ``rope_concentration``
  (``hf_limits.yarn_concentration``).
* ``glm4_moe`` (GLM-4.5, GLM-4.5-Air; ``Glm4MoeConfig``): GQA of ``head_dim`` heads, biases on Q, K and V only
  (``attention_bias``; the output projection has none), an RMSNorm on each query and key head when
  ``use_qk_norm``, then DeepSeek-style experts. ``partial_rotary_factor`` (rotary on half of each head) has no
  parameters and no FLOPs clustersim counts; a factor outside (0, 1] is refused. The router's score-correction
  bias is not counted, as for DeepSeek-V3.
* DeepSeek-style experts: ``first_k_dense_replace`` dense layers of ``intermediate_size``, then
  ``n_routed_experts`` + ``n_shared_experts`` experts of ``moe_intermediate_size``, ``num_experts_per_tok`` a
  token, group-limited routing over ``n_group`` groups keeping ``topk_group`` (none when ``n_group`` is 1);
  ``num_nextn_predict_layers`` multi-token-prediction modules (``mtp_layers``: trained beside the model, out of
  its parameter count).
"""

from __future__ import annotations

from typing import Any

from clustersim.workload.hf_fields import SILU, Config, rotary_fields, window_fields

# The modules the gpt-oss release leaves in bf16 (its quantization_config's modules_to_not_convert).
GPT_OSS_BF16_MODULES = ("model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head")


def deepseek_experts(cfg: Config, fields: dict[str, Any]) -> None:
    """Add DeepSeek-style experts (see the module docstring) to a model's ``fields``."""
    if cfg.count("moe_layer_freq", 1) != 1:
        raise cfg.fail("moe_layer_freq", cfg.raw("moe_layer_freq"), "not modelled: experts on every layer (1)")
    expert, groups = cfg.count("moe_intermediate_size"), cfg.count("n_group", 1)
    moe: dict[str, Any] = {
        "experts": cfg.count("n_routed_experts"),
        "top_k": cfg.count("num_experts_per_tok"),
        "shared_experts": cfg.count("n_shared_experts", 0, minimum=0),
        "expert_ffn_hidden": expert,
        "groups": groups,
    }
    if cfg.raw("topk_group") is not None:
        keep = cfg.count("topk_group")
        if groups > 1:
            moe["group_top_k"] = keep
        elif keep != 1:
            raise cfg.fail("topk_group", keep, "1 when n_group is 1 (no expert groups)")
    dense = cfg.count("first_k_dense_replace", 0, minimum=0)
    if dense >= fields["layers"]:
        raise cfg.fail("first_k_dense_replace", dense, f"fewer than num_hidden_layers {fields['layers']}")
    if dense:
        fields["dense_layers"] = dense
    else:
        fields["ffn_hidden"] = expert
    fields["moe"] = moe
    mtp = cfg.count("num_nextn_predict_layers", 0, minimum=0)
    if mtp:
        fields["mtp_layers"] = mtp


def glm4_moe(cfg: Config) -> dict[str, Any]:
    """GLM-4.5 and GLM-4.5-Air."""
    cfg.activation(("hidden_act",), "silu", SILU)
    cfg.refuse_if("mlp_bias", True, "biases on the MLP")
    factor = cfg.raw("partial_rotary_factor")
    if factor is not None and (isinstance(factor, bool) or not isinstance(factor, int | float) or not 0 < factor <= 1):
        raise cfg.fail("partial_rotary_factor", factor, "a number above 0 and at most 1 (the rotary share of a head)")
    fields = rotary_fields(cfg, "swiglu", tied=False)
    fields.update(qkv_bias=cfg.flag("attention_bias", False), qk_norm=cfg.flag("use_qk_norm", False))
    deepseek_experts(cfg, fields)
    return fields


def gpt_oss(cfg: Config) -> dict[str, Any]:
    """gpt-oss-120b and gpt-oss-20b."""
    cfg.activation(("hidden_act",), "silu", SILU)
    cfg.refuse_if("attention_bias", False, "gpt-oss without attention biases (its experts keep theirs)")
    top_k = cfg.count("num_experts_per_tok")
    if cfg.raw("experts_per_token") is not None and cfg.count("experts_per_token") != top_k:
        rule = f"the same as num_experts_per_tok {top_k} (two names of one count)"
        raise cfg.fail("experts_per_token", cfg.raw("experts_per_token"), rule)
    fields = rotary_fields(cfg, "swiglu", tied=False)
    fields.update(window_fields(cfg, fields["layers"], lambda i: i % 2 == 0))
    trained, context = cfg.count("initial_context_length", fields["seq_len"]), fields["max_context_tokens"]
    if trained > context:
        raise cfg.fail("initial_context_length", trained, f"at most the {context} tokens the positions cover")
    fields["seq_len"] = trained
    fields.update(linear_bias=True, moe={"experts": cfg.count("num_local_experts"), "top_k": top_k})
    limit = cfg.raw("swiglu_limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int | float) or limit <= 0):
        raise cfg.fail("swiglu_limit", limit, "a positive number (the clamp on the SwiGLU's inputs), or null")
    if limit is not None:
        fields["clamped_glu"] = True
    return fields


def is_gpt_oss_mxfp4_release(cfg: Config) -> bool:
    """True for the gpt-oss release's ``quantization_config`` (mxfp4 experts, the rest bf16); refuses an mxfp4
    config that converts any of those modules; False for any other (or no) quantization."""
    qc = cfg.raw("quantization_config")
    if not isinstance(qc, dict) or str(qc.get("quant_method", "")).lower() != "mxfp4":
        return False
    kept = qc.get("modules_to_not_convert")
    if not isinstance(kept, list) or not set(GPT_OSS_BF16_MODULES) <= set(kept):
        rule = f"the release's experts-only mxfp4, keeping {', '.join(GPT_OSS_BF16_MODULES)} in bf16"
        raise cfg.fail("quantization_config.modules_to_not_convert", kept, rule)
    return True
