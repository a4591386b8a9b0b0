"""Hugging Face ``config.json`` files read as a :class:`~clustersim.workload.transformer.Transformer`.

One reader per architecture family, chosen by ``model_type``, reads exactly the fields that family
uses, with the defaults its ``transformers`` configuration class gives a missing one:

* ``llama``, ``mistral``, ``mixtral``, ``qwen2``, ``qwen2_moe``, ``qwen3``, ``qwen3_moe``, ``phi3``:
  SwiGLU, RMSNorm, rotary; Qwen2 adds Q/K/V biases, Qwen3 per-head query/key norms; Mistral,
  Mixtral and Phi-3 window every layer by ``sliding_window``, Qwen those from ``max_window_layers``
  on when ``use_sliding_window``; a shared expert of Qwen2-MoE counts as
  ``shared_expert_intermediate_size / moe_intermediate_size`` experts (its one-weight gate is not
  counted, ``hidden`` per layer);
* ``gemma``, ``gemma2``, ``gemma3`` (its ``text_config``; the vision tower is not counted) and
  ``gemma3_text``: GeGLU, ``head_dim`` 256 unless given, tied embeddings (the ``sqrt(hidden)``
  embedding scale has no weights); Gemma 2 and 3 have four norms per block and window alternate
  layers (Gemma 2) or five in six (Gemma 3), Gemma 3 per-head query/key norms. Gemma 3's text
  config takes ``Gemma3TextConfig``'s defaults, as published configs leave most fields out;
* ``deepseek_v2``, ``deepseek_v3`` and ``kimi_k2`` (Kimi K2, the DeepSeek-V3 architecture): latent
  attention (``q_lora_rank``, ``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``,
  ``v_head_dim``), then DeepSeek-style experts (:mod:`~clustersim.workload.hf_moe`). DeepSeek-V3's
  multi-token-prediction module (``num_nextn_predict_layers``) is not part of the 671B total and is
  not counted (a training step prices it: ``mtp_layers``), nor is its router's score-correction bias
  (``n_routed_experts`` per MoE layer);
* ``qwen3_next`` (Qwen3-Next, a Gated DeltaNet hybrid) and ``nemotron_h`` (Nemotron-H and Nemotron 3, Mamba-2
  hybrids): see :mod:`~clustersim.workload.hf_hybrid`;
* ``gpt_oss`` (gpt-oss) and ``glm4_moe`` (GLM-4.5): see :mod:`~clustersim.workload.hf_moe` for what
  each reads, and what it does not count or price (attention sinks, MXFP4 experts, partial rotary);
* ``gpt2`` (learned positions of ``n_positions``), ``gpt_neox``, ``falcon`` (parallel attention
  and MLP after one norm, multi-query or ``new_decoder_architecture``), ``phi`` (Phi-1/2: one norm,
  biases; the output layer's bias, ``vocab`` weights, is not counted): GELU MLPs, LayerNorm.

Refused, each with one ``CatalogFileError`` naming the file, the field, the value and what is
valid: an unknown ``model_type``, an ``architectures`` entry that is not a causal LM, an activation
the family does not use, a missing required field, a count that is zero, negative, fractional or a
boolean, and options that change the counts but are not modelled (biases on the output projection
or MLP where the family has none, ALiBi, ``qk_layernorm``, experts on only some layers).

``seq_len`` is ``max_position_embeddings`` capped at 8192 (a long-context model's window is not its
training length), or ``n_positions`` exactly for learned positions (the table is counted).
``max_context_tokens`` is the context the positions cover: ``max_position_embeddings`` (``n_positions``),
or where ``rope_scaling`` stretches the rotary positions (``linear``, ``dynamic``, ``yarn``) from an
``original_max_position_embeddings``, the larger of it and ``factor x original`` (Qwen2.5's YaRN: 4 x
32,768); without an original, and for ``llama3`` and ``longrope``, ``max_position_embeddings`` already
states the extended window (Llama 3.1: 131,072; Gemma 3: 131,072 with linear factor 8). A
``quantization_config`` (GPTQ, AWQ, compressed-tensors, FP8) sets ``quantization``: the stored width
of the layer weights; other methods (bitsandbytes, ...) are refused (``hf_limits``). The name is
``_name_or_path`` when the file has one, else the file's stem unless it is ``config``, else the
name of the folder holding it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clustersim.errors import CatalogFileError
from clustersim.workload.hf_fields import MAX_DEFAULT_SEQ_LEN, SILU
from clustersim.workload.hf_fields import Config as Config
from clustersim.workload.hf_fields import no_extra_biases as _no_extra_biases
from clustersim.workload.hf_fields import rotary_fields as _rotary
from clustersim.workload.hf_fields import window_fields as _window
from clustersim.workload.hf_hybrid import nemotron_h, qwen3_next
from clustersim.workload.hf_limits import context_tokens, read_quantization
from clustersim.workload.hf_moe import deepseek_experts, glm4_moe, gpt_oss, is_gpt_oss_mxfp4_release
from clustersim.workload.quantization import MXFP4_EXPERTS
from clustersim.workload.transformer import Transformer, transformer_from_mapping

GELU = ("gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_accurate", "quick_gelu")
ELEMENTWISE = (*GELU, "relu")
CAUSAL_LM_SUFFIXES = ("ForCausalLM", "LMHeadModel")
GEMMA2_DEFAULTS: dict[str, Any] = {"sliding_window": 4096}  # transformers' Gemma2Config
GEMMA3_TEXT_DEFAULTS: dict[str, Any] = {  # transformers' Gemma3TextConfig
    "vocab_size": 262_208,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 131_072,
    "sliding_window": 4096,
    "sliding_window_pattern": 6,
}
MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size")
MOE_FAMILIES = (
    "mixtral", "qwen2_moe", "qwen3_moe", "qwen3_next", "nemotron_h", "deepseek_v2", "deepseek_v3", "kimi_k2",
    "glm4_moe", "gpt_oss",
)  # fmt: skip
# ---- families ----------------------------------------------------------------------------------------


def _llama(cfg: Config) -> dict[str, Any]:
    cfg.activation(("hidden_act",), "silu", SILU)
    _no_extra_biases(cfg)
    return _rotary(cfg, "swiglu", tied=False)


def _mistral(cfg: Config) -> dict[str, Any]:  # also Phi-3: every layer windowed
    fields = _llama(cfg)
    fields.update(_window(cfg, fields["layers"], (lambda i: True) if cfg.raw("sliding_window") else None))
    return fields


def _mixtral(cfg: Config) -> dict[str, Any]:
    fields = _mistral(cfg)
    fields["moe"] = {"experts": cfg.count("num_local_experts"), "top_k": cfg.count("num_experts_per_tok")}
    return fields


def _qwen(cfg: Config, *, qwen3: bool, moe: bool) -> dict[str, Any]:
    cfg.activation(("hidden_act",), "silu", SILU)
    if qwen3:
        _no_extra_biases(cfg)
    fields = _rotary(cfg, "swiglu", tied=False, head_dim=128 if qwen3 else None)
    fields.update({"qk_norm": True} if qwen3 else {"qkv_bias": True})
    layers = fields["layers"]
    if cfg.flag("use_sliding_window", False):
        first = cfg.count("max_window_layers", layers, minimum=0)
        fields.update(_window(cfg, layers, lambda i: i >= first))
    else:
        fields.update(_window(cfg, layers, None))
    if moe:
        _qwen_moe(cfg, fields, shared=not qwen3)
    return fields


def _qwen_moe(cfg: Config, fields: dict[str, Any], *, shared: bool) -> None:
    """Qwen2-MoE (a shared expert) and Qwen3-MoE experts, on every ``decoder_sparse_step``-th layer (layer i
    when (i + 1) % step == 0, the others dense MLPs of ``intermediate_size``) but leading ``mlp_only_layers``."""
    layers, expert = fields["layers"], cfg.count("moe_intermediate_size")
    step = cfg.count("decoder_sparse_step", 1)
    dense = cfg.raw("mlp_only_layers") or []
    if step > 1 and (dense or step > layers):
        rule = f"not modelled with mlp_only_layers, nor beyond the {layers} layers (every n-th layer a MoE block)"
        raise cfg.fail("decoder_sparse_step", cfg.raw("decoder_sparse_step"), rule)
    if not isinstance(dense, list) or dense != list(range(len(dense))) or len(dense) >= layers:
        raise cfg.fail("mlp_only_layers", dense, "not modelled unless the leading layers 0, 1, ... (or none)")
    moe: dict[str, Any] = {"experts": cfg.count("num_experts"), "top_k": cfg.count("num_experts_per_tok")}
    width = cfg.count("shared_expert_intermediate_size", minimum=0) if shared else 0
    if width % expert:
        rule = f"not modelled unless a multiple of moe_intermediate_size {expert}"
        raise cfg.fail("shared_expert_intermediate_size", width, rule)
    moe["shared_experts"] = width // expert
    if dense:
        fields["dense_layers"], moe["expert_ffn_hidden"] = len(dense), expert
    elif step > 1:
        fields["moe_layer_step"], moe["expert_ffn_hidden"] = step, expert
    else:
        fields["ffn_hidden"] = expert
    fields["moe"] = moe


def _gemma(cfg: Config, generation: int) -> dict[str, Any]:
    cfg.activation(("hidden_activation", "hidden_act"), "gelu_pytorch_tanh", GELU)
    _no_extra_biases(cfg)
    fields = _rotary(cfg, "geglu", tied=True, head_dim=256)
    layers = fields["layers"]
    if generation == 2:
        fields.update(layer_norms=4, **_window(cfg, layers, lambda i: i % 2 == 0))
    elif generation == 3:
        pattern = cfg.count("sliding_window_pattern", 6)
        fields.update(layer_norms=4, qk_norm=True, **_window(cfg, layers, lambda i: (i + 1) % pattern != 0))
    return fields


def _deepseek(cfg: Config) -> dict[str, Any]:
    cfg.activation(("hidden_act",), "silu", SILU)
    cfg.refuse_if("attention_bias", True, "biases on the attention projections")
    heads = cfg.count("num_attention_heads")
    if cfg.count("num_key_value_heads", heads) != heads:
        raise cfg.fail("num_key_value_heads", cfg.raw("num_key_value_heads"), f"latent attention has {heads} (heads)")
    rope = cfg.count("qk_rope_head_dim")
    fields: dict[str, Any] = {
        "layers": cfg.count("num_hidden_layers"),
        "hidden": cfg.count("hidden_size"),
        "ffn_hidden": cfg.count("intermediate_size"),
        "heads": heads,
        "head_dim": cfg.count("qk_nope_head_dim") + rope,
        "vocab": cfg.count("vocab_size"),
        "seq_len": min(cfg.count("max_position_embeddings", 2048), MAX_DEFAULT_SEQ_LEN),
        "max_context_tokens": context_tokens(cfg),
        "ffn_type": "swiglu",
        "tied_embeddings": cfg.flag("tie_word_embeddings", False),
        "mla": {
            "q_lora_rank": cfg.count("q_lora_rank", 0),
            "kv_lora_rank": cfg.count("kv_lora_rank"),
            "rope_head_dim": rope,
            "v_head_dim": cfg.count("v_head_dim"),
        },
    }
    if cfg.raw("n_routed_experts") is not None:
        deepseek_experts(cfg, fields)
    return fields


def _gpt2(cfg: Config) -> dict[str, Any]:
    cfg.activation(("activation_function",), "gelu_new", ELEMENTWISE)
    cfg.refuse_if("add_cross_attention", True, "cross-attention layers")
    hidden = cfg.count("n_embd")
    return {
        "layers": cfg.count("n_layer"),
        "hidden": hidden,
        "ffn_hidden": cfg.count("n_inner", 4 * hidden),
        "heads": cfg.count("n_head"),
        "vocab": cfg.count("vocab_size"),
        "seq_len": cfg.count("n_positions"),
        "max_context_tokens": cfg.count("n_positions"),
        "ffn_type": "gelu",
        "tied_embeddings": cfg.flag("tie_word_embeddings", True),
    }


def _layernorm_rotary(cfg: Config, *, tied: bool, bias: bool) -> dict[str, Any]:
    """GPT-NeoX and Phi: the rotary fields with a GELU MLP, LayerNorm and biases."""
    fields = _rotary(cfg, "gelu", tied=tied)
    fields.update(norm="layernorm", linear_bias=bias)
    return fields


def _gpt_neox(cfg: Config) -> dict[str, Any]:
    cfg.activation(("hidden_act",), "gelu", ELEMENTWISE)
    cfg.refuse_if("attention_bias", False, "a GPT-NeoX without attention biases (its MLP keeps them)")
    return _layernorm_rotary(cfg, tied=False, bias=True)


def _phi(cfg: Config) -> dict[str, Any]:
    cfg.activation(("hidden_act",), "gelu_new", ELEMENTWISE)
    cfg.refuse_if("qk_layernorm", True, "LayerNorms on the queries and keys")
    fields = _layernorm_rotary(cfg, tied=False, bias=True)
    fields["layer_norms"] = 1  # attention and MLP in parallel after one LayerNorm
    return fields


def _falcon(cfg: Config, *, new_default: bool = False) -> dict[str, Any]:
    """Falcon; ``n_head``, ``n_head_kv`` and ``n_layer`` are the names before transformers 4.33."""
    cfg.activation(("activation",), "gelu", ELEMENTWISE)
    cfg.refuse_if("alibi", True, "ALiBi positions (Falcon-RW)")
    hidden = cfg.count("hidden_size")
    heads = cfg.count("num_attention_heads") if cfg.raw("n_head") is None else cfg.count("n_head")
    new = cfg.flag("new_decoder_architecture", new_default)
    if new:
        kv_key = "num_kv_heads" if cfg.raw("n_head_kv") is None else "n_head_kv"
        kv_heads, norms = cfg.count(kv_key, heads), cfg.count("num_ln_in_parallel_attn", 2)
    else:
        kv_heads = 1 if cfg.flag("multi_query", True) else heads
        norms = 1 if cfg.flag("parallel_attn", True) else 2
    layers_key = "num_hidden_layers" if cfg.raw("n_layer") is None else "n_layer"
    return {
        "layers": cfg.count(layers_key),
        "hidden": hidden,
        "ffn_hidden": cfg.count("ffn_hidden_size", 4 * hidden),
        "heads": heads,
        "kv_heads": kv_heads,
        "vocab": cfg.count("vocab_size"),
        "seq_len": min(cfg.count("max_position_embeddings", 2048), MAX_DEFAULT_SEQ_LEN),
        "max_context_tokens": context_tokens(cfg),
        "ffn_type": "gelu",
        "norm": "layernorm",
        "position": "rotary",
        "linear_bias": cfg.flag("bias", False),
        "tied_embeddings": cfg.flag("tie_word_embeddings", True),
        "layer_norms": norms,
    }


FAMILIES: dict[str, Callable[[Config], dict[str, Any]]] = {
    "llama": _llama,
    "mistral": _mistral,
    "mixtral": _mixtral,
    "phi3": _mistral,
    "qwen2": lambda cfg: _qwen(cfg, qwen3=False, moe=False),
    "qwen2_moe": lambda cfg: _qwen(cfg, qwen3=False, moe=True),
    "qwen3": lambda cfg: _qwen(cfg, qwen3=True, moe=False),
    "qwen3_moe": lambda cfg: _qwen(cfg, qwen3=True, moe=True),
    "qwen3_next": qwen3_next,  # Gated DeltaNet hybrid (clustersim.workload.hf_hybrid)
    "nemotron_h": nemotron_h,  # Mamba-2 hybrid (clustersim.workload.hf_hybrid)
    "gemma": lambda cfg: _gemma(cfg, 1),
    "gemma2": lambda cfg: _gemma(cfg, 2),
    "gemma3_text": lambda cfg: _gemma(cfg, 3),
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "kimi_k2": _deepseek,  # Kimi K2: the DeepSeek-V3 architecture (architectures DeepseekV3ForCausalLM)
    "glm4_moe": glm4_moe,
    "gpt_oss": gpt_oss,
    "gpt2": _gpt2,
    "gpt_neox": _gpt_neox,
    "falcon": _falcon,
    "refinedwebmodel": _falcon,  # Falcon-7B's config before transformers 4.33
    "refinedweb": lambda cfg: _falcon(cfg, new_default=True),  # Falcon-40B's
    "phi": _phi,
}


# ---- the file -------------------------------------------------------------------------------------------


def read_hf_config(path: Path) -> Transformer:
    """A ``Transformer`` from a local Hugging Face ``config.json`` (see the module docstring for
    the families, the fields read and what is refused)."""
    where = str(path)
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise CatalogFileError(where, None, None, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise CatalogFileError(where, None, None, None, f"cannot read the JSON config: {exc}") from None
    if not isinstance(data, dict):
        raise CatalogFileError(where, None, None, None, "a config.json holds one JSON object")
    cfg = Config(where, data)
    model_type = cfg.text("model_type", "")
    _check_architectures(cfg, model_type)
    if model_type == "gemma3":  # the multimodal config: read its language model
        text = data.get("text_config")
        if not isinstance(text, dict):
            raise cfg.fail("text_config", text, "a JSON object holding the language model's fields")
        cfg, model_type = Config(where, text, "text_config.", GEMMA3_TEXT_DEFAULTS), "gemma3_text"
    elif model_type in ("gemma2", "gemma3_text"):
        cfg = Config(where, data, "", GEMMA2_DEFAULTS if model_type == "gemma2" else GEMMA3_TEXT_DEFAULTS)
    if model_type not in FAMILIES:
        valid = ", ".join(sorted({*FAMILIES, "gemma3"} - {"refinedweb", "refinedwebmodel"}))
        raise cfg.fail("model_type", cfg.raw("model_type"), f"not a family clustersim reads (known: {valid})")
    for key in MOE_KEYS:
        if cfg.raw(key) is not None and model_type not in MOE_FAMILIES:
            raise cfg.fail(key, cfg.raw(key), f"model_type {model_type!r} has no experts: write a MoE model_type")
    fields = FAMILIES[model_type](cfg)
    fields["name"] = model_name(path, data)
    whole = Config(where, data)
    release = model_type == "gpt_oss" and is_gpt_oss_mxfp4_release(whole)
    quantization = MXFP4_EXPERTS.model_dump() if release else read_quantization(whole)
    if quantization is not None:
        fields["quantization"] = quantization
    return transformer_from_mapping(fields, where=where)


def _check_architectures(cfg: Config, model_type: str) -> None:
    """``architectures``, when given, names causal language models (a classifier's head differs)."""
    names = cfg.raw("architectures")
    if names is None:
        return
    suffixes = (*CAUSAL_LM_SUFFIXES, "ForConditionalGeneration") if model_type == "gemma3" else CAUSAL_LM_SUFFIXES
    if not isinstance(names, list) or not all(isinstance(n, str) and n.endswith(suffixes) for n in names):
        raise cfg.fail("architectures", names, f"a causal language model (a class ending in {', '.join(suffixes)})")


def model_name(path: Path, data: dict[str, Any]) -> str:
    """``_name_or_path`` when given, else the file's stem unless it is ``config``, else its folder's name."""
    given = data.get("_name_or_path")
    if isinstance(given, str) and given.strip():
        return given.strip()
    if path.stem.lower() != "config":
        return path.stem
    return path.resolve().parent.name or path.stem
