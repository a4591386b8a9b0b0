"""The Hugging Face readers of the recurrent hybrids: Qwen3-Next (``model_type`` ``qwen3_next``), a Gated DeltaNet
hybrid, and Nemotron-H and Nemotron 3 (``nemotron_h``), Mamba-2 hybrids.

Fields read beyond a Qwen3-MoE's (transformers ``Qwen3NextConfig``): ``layer_types`` (each ``linear_attention`` or
``full_attention``), or without it ``full_attention_interval`` (default 4: layer ``i`` attends when
``(i + 1) % 4 == 0``); ``linear_num_key_heads``, ``linear_num_value_heads``, ``linear_key_head_dim``,
``linear_value_head_dim`` and ``linear_conv_kernel_dim``; the shared expert's ``shared_expert_intermediate_size``
(a multiple of ``moe_intermediate_size``). Every attention layer gates its output (``Qwen3NextAttention``'s
query projection is twice the queries' width). Refused: ``decoder_sparse_step`` other than 1 and
``mlp_only_layers`` (dense layers between the hybrid's MoE blocks), which no published Qwen3-Next sets.

Nemotron-H (transformers ``NemotronHConfig``) lists its blocks in ``hybrid_override_pattern``, one character each:
``M`` a Mamba-2 mixer, ``*`` attention, ``-`` a dense MLP, ``E`` a MoE MLP (or in ``layers_block_type`` by name,
``mamba``, ``attention``, ``mlp``, ``moe``, its length the block count where ``num_hidden_layers`` is null). Each
mixer and the MLP block after it are one layer (``clustersim.workload.transformer``); a mixer followed by another
mixer is a layer with no MLP (``mlp_free_layers``). Read beside it: ``attention_head_dim`` (else ``head_dim``, else
128), ``mamba_num_heads``, ``mamba_head_dim``, ``ssm_state_size``, ``n_groups``, ``conv_kernel`` and
``mamba_ssm_cache_dtype`` (the Mamba-2 layers; the states' width an engine keeps, float32 where absent),
``intermediate_size`` (the dense MLP), ``n_routed_experts``, ``num_experts_per_tok``, ``moe_intermediate_size`` and
``moe_shared_expert_intermediate_size`` (a multiple of the expert width) and ``moe_latent_size`` (Nemotron 3 Super and
Ultra: the routed experts work in that width, projected from and back to the hidden size around them; the shared
experts read the hidden size). The MLP is squared ReLU (``mlp_hidden_act`` ``relu2``, two matrices); no position
encoding; RMSNorm. The multi-token-prediction block (``num_nextn_predict_layers``) is not part of the model: a
training case states it (``mtp_layers``). Refused: an MLP block that follows no mixer (Nemotron-H 47B's ``---``),
dense and MoE MLP blocks in one model, group-limited routing (``n_group`` above 1) and biases the counts leave out
(``use_bias``, ``attention_bias``, ``mlp_bias``; ``use_conv_bias`` false).
"""

from __future__ import annotations

from typing import Any

from clustersim.workload.hf_fields import SILU, Config, no_extra_biases, rotary_fields

LAYER_KINDS = ("linear_attention", "full_attention")
MIXER_BLOCKS = "M*"  # Nemotron-H's Mamba-2 and attention blocks
MLP_BLOCKS = "-E"  # its dense and MoE MLP blocks
BLOCK_NAMES = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}  # layers_block_type's names for them
STATE_DTYPE_BYTES = {"float32": 4.0, "bfloat16": 2.0, "float16": 2.0}


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
    experts = {"experts": cfg.count("num_experts"), "top_k": cfg.count("num_experts_per_tok")}
    fields.update(
        ffn_hidden=expert,
        qk_norm=True,
        attention_gate=True,
        moe=experts | {"shared_experts": _shared_experts(cfg, "shared_expert_intermediate_size", expert)},
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


def _state_bytes(cfg: Config) -> float:
    """The width of the Mamba-2 states the checkpoint asks for (``mamba_ssm_cache_dtype``): float32 where it is silent,
    as vLLM's Nemotron-H models and SGLang default (vllm-project/vllm ``NemotronHForCausalLMConfig``
    DEFAULT_MAMBA_SSM_CACHE_DTYPE; sgl-project/sglang mamba_utils ``mamba2_state_dtype``)."""
    dtype = cfg.text("mamba_ssm_cache_dtype", "float32")
    if dtype not in STATE_DTYPE_BYTES:
        raise cfg.fail("mamba_ssm_cache_dtype", dtype, f"one of {', '.join(STATE_DTYPE_BYTES)}")
    return STATE_DTYPE_BYTES[dtype]


def _shared_experts(cfg: Config, key: str, expert: int) -> int:
    """The shared experts of the routed width ``expert`` that the shared MLP's width ``key`` makes (0 absent)."""
    shared = cfg.count(key, 0, minimum=0)
    if shared % expert:
        raise cfg.fail(key, shared, f"not modelled unless a multiple of moe_intermediate_size {expert}")
    return shared // expert


def _linear_layers(cfg: Config, layers: int) -> int:
    """Gated DeltaNet layers: by ``layer_types``, else all but every ``full_attention_interval``-th."""
    types = cfg.raw("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers or any(t not in LAYER_KINDS for t in types):
            raise cfg.fail("layer_types", types, f"a list of {layers} entries, each one of {', '.join(LAYER_KINDS)}")
        return types.count("linear_attention")
    interval = cfg.count("full_attention_interval", 4)
    return layers - layers // interval


def nemotron_h(cfg: Config) -> dict[str, Any]:
    """The fields of a Nemotron-H or Nemotron 3 config."""
    cfg.activation(("mlp_hidden_act",), "relu2", ("relu2",))
    for key in ("use_bias", "attention_bias", "mlp_bias"):
        if cfg.flag(key, False):
            raise cfg.fail(key, True, "biases on the projections are not modelled in Nemotron-H (give false)")
    if not cfg.flag("use_conv_bias", True):
        raise cfg.fail("use_conv_bias", False, "not modelled: the Mamba-2 convolution is counted with its bias")
    if cfg.count("n_group", 1) != 1:
        raise cfg.fail("n_group", cfg.raw("n_group"), "group-limited routing is not read from this family (give 1)")
    cfg = _with_block_count(cfg)
    fields = rotary_fields(cfg, "gelu", tied=False, head_dim=128)
    if cfg.raw("attention_head_dim") is not None:  # Nemotron-H's name for it (NemotronHConfig attention_head_dim)
        fields["head_dim"] = cfg.count("attention_head_dim")
    pattern = _hybrid_pattern(cfg, fields["layers"])
    mixers, mlps = sum(pattern.count(c) for c in MIXER_BLOCKS), sum(pattern.count(c) for c in MLP_BLOCKS)
    fields.update(
        layers=mixers,
        position="none",
        norm="rmsnorm",
        linear_bias=False,
        linear_attention={
            "kind": "mamba2",
            "layers": pattern.count("M"),
            "key_heads": cfg.count("n_groups", 8),
            "value_heads": cfg.count("mamba_num_heads"),
            "key_head_dim": cfg.count("ssm_state_size", 128),
            "value_head_dim": cfg.count("mamba_head_dim", 64),
            "conv_kernel": cfg.count("conv_kernel", 4),
            "state_bytes": _state_bytes(cfg),
        },
    )
    if mixers > mlps:
        fields["mlp_free_layers"] = mixers - mlps
    if "E" in pattern:
        expert = cfg.count("moe_intermediate_size")
        shared = _shared_experts(cfg, "moe_shared_expert_intermediate_size", expert)
        experts = {"experts": cfg.count("n_routed_experts"), "top_k": cfg.count("num_experts_per_tok")}
        if cfg.raw("moe_latent_size") is not None:  # Nemotron 3 Super and Ultra: routed experts in a latent width
            experts["latent"] = cfg.count("moe_latent_size")
        fields.update(ffn_hidden=expert, moe=experts | {"shared_experts": shared})
    return fields


def _with_block_count(cfg: Config) -> Config:
    """The config, its block count taken from ``layers_block_type`` where that lists the blocks and
    ``num_hidden_layers`` is null (Nemotron 3 Ultra's config)."""
    types = cfg.raw("layers_block_type")
    if not isinstance(types, list) or cfg.raw("num_hidden_layers") is not None:
        return cfg
    return Config(cfg.path, cfg.data, cfg.prefix, {**cfg.defaults, "num_hidden_layers": len(types)})


def _hybrid_pattern(cfg: Config, blocks: int) -> str:
    """``hybrid_override_pattern`` (or ``layers_block_type``, its blocks by name): ``blocks`` characters of ``M*-E``,
    each MLP block after a mixer, and the MLP blocks all dense or all MoE."""
    valid = MIXER_BLOCKS + MLP_BLOCKS
    key, pattern, unit = "hybrid_override_pattern", cfg.raw("hybrid_override_pattern"), "characters"
    if cfg.raw("layers_block_type") is not None:
        key, types, unit = "layers_block_type", cfg.raw("layers_block_type"), "blocks"
        if not isinstance(types, list) or any(not isinstance(t, str) or t not in BLOCK_NAMES for t in types):
            raise cfg.fail(key, types, f"a list of block names, each one of {', '.join(BLOCK_NAMES)}")
        pattern = "".join(BLOCK_NAMES[t] for t in types)
    if not isinstance(pattern, str) or len(pattern) != blocks or any(c not in valid for c in pattern):
        raise cfg.fail(key, pattern, f"{blocks} {unit} (num_hidden_layers), each of {valid}")
    for i, block in enumerate(pattern):
        if block in MLP_BLOCKS and (i == 0 or pattern[i - 1] not in MIXER_BLOCKS):
            rule = "an MLP block must follow a mixer (M or *): MLP blocks in a row are not modelled"
            raise cfg.fail(key, pattern, f"{rule} (block {i})")
    if "-" in pattern and "E" in pattern:
        raise cfg.fail(key, pattern, "dense (-) and MoE (E) MLP blocks together are not modelled")
    if "M" not in pattern or "*" not in pattern:
        raise cfg.fail(key, pattern, "a hybrid needs Mamba-2 (M) and attention (*) blocks")
    return pattern
