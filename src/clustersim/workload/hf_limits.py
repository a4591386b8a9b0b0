"""The limits a Hugging Face ``config.json`` states beside the shape: the context its positions cover
(``max_position_embeddings`` and ``rope_scaling``) and the width a quantized checkpoint stores its
weights at (``quantization_config``). See :mod:`clustersim.workload.hf` for the rules."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clustersim.workload.hf import Config

STATED_ROPE = ("default", "llama3", "longrope", "su", "mrope")  # max_position_embeddings is the extended window
STRETCHING_ROPE = ("linear", "dynamic", "yarn")  # factor x the original window


def context_tokens(cfg: Config) -> int:
    """The context the rotary positions cover (see the module docstring)."""
    trained = cfg.count("max_position_embeddings", 2048)
    scaling = cfg.raw("rope_scaling")
    if scaling is None:
        return trained
    if not isinstance(scaling, dict):
        raise cfg.fail("rope_scaling", scaling, "a JSON object with rope_type (or type) and factor, or null")
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind not in STRETCHING_ROPE and kind not in STATED_ROPE:
        valid = ", ".join((*STATED_ROPE, *STRETCHING_ROPE))
        raise cfg.fail("rope_scaling.rope_type", kind, f"not a rope scaling clustersim reads (known: {valid})")
    if kind in STATED_ROPE:
        return trained
    factor = scaling.get("factor")
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not 1 <= factor <= 1024:
        raise cfg.fail("rope_scaling.factor", factor, "a number from 1 to 1024")
    original = scaling.get("original_max_position_embeddings")
    if original is None:
        return trained
    if isinstance(original, bool) or not isinstance(original, int) or original < 1:
        raise cfg.fail("rope_scaling.original_max_position_embeddings", original, "a whole number of at least 1")
    return max(trained, int(factor * original))


def yarn_concentration(cfg: Config) -> float:
    """YaRN's factor on the rotary cos and sin tables (1 without YaRN), as transformers computes it
    (modeling_rope_utils.py ``_compute_yarn_parameters``): ``attention_factor`` where given, else
    ``m(factor, mscale) / m(factor, mscale_all_dim)`` where both mscales are, else ``m(factor, 1)``, with
    ``m(s, k) = 0.1 k ln s + 1`` (1 for ``s <= 1``): gpt-oss's factor 32 gives 1.3466, DeepSeek-V3's equal mscales 1."""
    scaling = cfg.raw("rope_scaling")
    if not isinstance(scaling, dict) or scaling.get("rope_type", scaling.get("type")) != "yarn":
        return 1.0
    context_tokens(cfg)  # the factor checked
    given = scaling.get("attention_factor")
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int | float) or not 0 < given <= 10:
            raise cfg.fail("rope_scaling.attention_factor", given, "a number above 0, at most 10")
        return float(given)
    factor = float(scaling["factor"])

    def m(k: float) -> float:
        return 0.1 * k * math.log(factor) + 1.0 if factor > 1 else 1.0

    mscale, all_dims = scaling.get("mscale"), scaling.get("mscale_all_dim")
    for key, value in (("mscale", mscale), ("mscale_all_dim", all_dims)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
            raise cfg.fail(f"rope_scaling.{key}", value, "a number of at least 0, or null")
    if mscale and all_dims:
        return round(m(float(mscale)) / m(float(all_dims)), 4)
    return round(m(1.0), 4)


def read_quantization(cfg: Config) -> dict[str, Any] | None:
    """The ``quantization`` fields of a ``quantization_config`` (None without one)."""
    qc = cfg.raw("quantization_config")
    if qc is None:
        return None
    if not isinstance(qc, dict):
        raise cfg.fail("quantization_config", qc, "a JSON object with quant_method")
    method = str(qc.get("quant_method", "")).lower()
    q = type(cfg)(cfg.path, qc, "quantization_config.")
    if method in ("gptq", "awq"):
        group = qc.get("group_size", 128)
        group = 0 if group == -1 else q.count("group_size", 128, minimum=1)
        zero = method == "gptq" or q.flag("zero_point", True)
        return {"method": method, "bits": _bits(q, "bits"), "group_size": group, "zero_point": zero}
    if method == "fp8":
        block = qc.get("weight_block_size")
        if block is not None and not (
            isinstance(block, list) and len(block) == 2 and all(type(n) is int and n > 0 for n in block)
        ):
            raise q.fail("weight_block_size", block, "two whole numbers of at least 1, e.g. [128, 128], or null")
        size = block[0] * block[1] if block else 0
        return {"method": "fp8", "bits": 8, "group_size": size, "zero_point": False}
    if method == "compressed-tensors":
        return _compressed_tensors(q)
    valid = "gptq, awq, compressed-tensors, fp8"
    raise q.fail("quant_method", qc.get("quant_method"), f"not a quantization clustersim prices (known: {valid})")


def _bits(q: Config, key: str) -> int:
    bits = q.count(key)
    if bits not in (4, 8):
        raise q.fail(key, bits, "clustersim prices 4- or 8-bit weights")
    return bits


def _compressed_tensors(q: Config) -> dict[str, Any]:
    """compressed-tensors: every config group's weights at one width (e.g. W4A16, W8A8, FP8)."""
    groups = q.raw("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise q.fail("config_groups", groups, "a JSON object of groups, each with its weights' num_bits")
    found = set()
    for name, group in groups.items():
        weights = group.get("weights") if isinstance(group, dict) else None
        if not isinstance(weights, dict):
            raise q.fail(f"config_groups.{name}.weights", weights, "a JSON object with num_bits")
        w = type(q)(q.path, weights, f"{q.prefix}config_groups.{name}.weights.")
        strategy = w.text("strategy", "channel")
        size = w.count("group_size", 128) if strategy == "group" else 0
        found.add((_bits(w, "num_bits"), size, not w.flag("symmetric", True)))
    if len(found) > 1:
        raise q.fail("config_groups", sorted(found), "not modelled: groups stored at different widths")
    bits, size, zero = found.pop()
    return {"method": "compressed-tensors", "bits": bits, "group_size": size, "zero_point": zero}
