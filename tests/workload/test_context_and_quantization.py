"""A model's own limits: the context its positions cover and the width a quantized checkpoint stores.

Configs: Llama 3.1 (https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json, rope_type
llama3 with max_position_embeddings 131072), Qwen2.5's YaRN recipe (the Qwen2.5-7B-Instruct model card:
factor 4 over original_max_position_embeddings 32768), DeepSeek-V3 (yarn, factor 40 over 4096 =
163840), GPTQ/AWQ ``quantization_config`` as AutoGPTQ and AutoAWQ write them (bits, group_size,
quant_method), compressed-tensors W4A16 and FP8 configs as llm-compressor writes them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError
from clustersim.serving.memory import weight_bytes_per_device, weights_note
from clustersim.workload.hf import read_hf_config
from clustersim.workload.transformer import Transformer
from clustersim.workload.zoo import load_model
from tests.workload.hf_configs import AWQ_4BIT, DEEPSEEK_V3, FP8_BLOCK, GEMMA3_27B, GPT2, GPTQ_4BIT, LLAMA3_8B, W4A16

LLAMA31_8B = {
    **LLAMA3_8B,
    "_name_or_path": "meta-llama/Llama-3.1-8B",
    "max_position_embeddings": 131072,
    "rope_scaling": {
        "factor": 8.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
}


def _read(tmp_path: Path, config: dict[str, Any]) -> Transformer:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return read_hf_config(path)


# ---- the context -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("config", "seq_len", "context"),
    [
        (LLAMA3_8B, 8192, 8192),
        (LLAMA31_8B, 8192, 131072),  # rope_type llama3 keeps the extended window in max_position_embeddings
        ({**LLAMA3_8B, "max_position_embeddings": 32768,
          "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}, 8192, 131072),
        (DEEPSEEK_V3, 8192, 163840),
        (GEMMA3_27B, 8192, 131072),  # linear factor 8 without an original: the window is stated
        (GPT2, 1024, 1024),
    ],
)  # fmt: skip
def test_the_context_is_read_beside_the_training_length(
    tmp_path: Path, config: dict[str, Any], seq_len: int, context: int
) -> None:
    model = _read(tmp_path, config)
    assert (model.seq_len, model.max_context_tokens, model.context_tokens) == (seq_len, context, context)


def test_an_unknown_rope_scaling_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ClusterSimError, match=r"rope_scaling.rope_type.*'magic'.*known: default, llama3"):
        _read(tmp_path, {**LLAMA3_8B, "rope_scaling": {"rope_type": "magic", "factor": 2}})


@pytest.mark.parametrize(
    ("model_id", "seq_len", "context"),
    [("llama2-7b", 4096, 4096), ("llama3-8b", 8192, 8192), ("llama3.1-405b", 8192, 131072),
     ("llama3.3-70b", 8192, 131072), ("mixtral-8x7b", 32768, 32768), ("gpt3-175b", 2048, 2048)],
)  # fmt: skip
def test_the_zoo_states_each_context(model_id: str, seq_len: int, context: int) -> None:
    model = load_model(model_id, use_env=False)
    assert (model.seq_len, model.context_tokens) == (seq_len, context)


def test_a_sequence_beyond_the_context_is_refused_unless_asked() -> None:
    model = load_model("llama3-8b", use_env=False)
    assert model.check_context(8192, "seq_len") is None
    with pytest.raises(ClusterSimError, match=r"^seq_len is 1,000,000 tokens, beyond the context of llama3-8b, 8,192"):
        model.check_context(1_000_000, "seq_len")
    note = model.check_context(1_000_000, "seq_len", beyond_context=True)
    assert note is not None and note.startswith("beyond context: seq_len is 1,000,000 tokens")


def test_a_model_without_a_stated_context_is_not_limited() -> None:
    model = Transformer(layers=2, hidden=64, ffn_hidden=128, heads=4, vocab=100, ffn_type="swiglu")
    assert model.context_tokens is None and model.check_context(10**7, "seq_len") is None
    assert "max_context_tokens" not in model.model_dump()  # records of models without it are unchanged


# ---- quantized checkpoints ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("quantization", "bits", "group", "bytes_per_weight"),
    [
        (GPTQ_4BIT, 4, 128, 0.5 + (16 + 4) / 8 / 128),
        (AWQ_4BIT, 4, 128, 0.5 + (16 + 4) / 8 / 128),
        ({**GPTQ_4BIT, "bits": 8, "group_size": -1}, 8, 0, 1.0),
        (W4A16, 4, 128, 0.5 + 2 / 128),
        (FP8_BLOCK, 8, 128 * 128, 1.0 + 2 / 128**2),
    ],
)
def test_quantization_configs_are_read(
    tmp_path: Path, quantization: dict[str, Any], bits: int, group: int, bytes_per_weight: float
) -> None:
    model = _read(tmp_path, {**LLAMA3_8B, "quantization_config": quantization})
    assert model.quantization is not None
    assert (model.quantization.bits, model.quantization.group_size) == (bits, group)
    assert model.quantization.bytes_per_weight == pytest.approx(bytes_per_weight)
    assert model.num_params() == load_model("llama3-8b", use_env=False).num_params()


@pytest.mark.parametrize(
    ("quantization", "match"),
    [
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, r"quant_method.*'bitsandbytes'.*known: gptq"),
        ({**GPTQ_4BIT, "bits": 3}, r"quantization_config.bits.*3.*4- or 8-bit"),
        ("gptq", r"quantization_config.*a JSON object"),
        ({**FP8_BLOCK, "weight_block_size": ["a", "b"]}, r"quantization_config.weight_block_size.*two whole"),
    ],
)
def test_quantizations_not_priced_are_refused(tmp_path: Path, quantization: Any, match: str) -> None:
    with pytest.raises(ClusterSimError, match=match):
        _read(tmp_path, {**LLAMA3_8B, "quantization_config": quantization})


def test_a_gptq_checkpoint_is_served_at_its_stored_width(tmp_path: Path) -> None:
    bf16 = _read(tmp_path, LLAMA3_8B)
    gptq = _read(tmp_path, {**LLAMA3_8B, "quantization_config": GPTQ_4BIT})
    full, four_bit = (weight_bytes_per_device(m, Dtype.BF16) for m in (bf16, gptq))
    embeddings = 2 * bf16.vocab * bf16.hidden * 2  # input and output, bf16
    # Before: the 4-bit config was priced as bf16 (15.0 GB); now the layers take 0.52 bytes a weight.
    assert full == pytest.approx(2 * bf16.num_params(), rel=1e-3)
    layers = (full - embeddings) / 2
    assert four_bit == pytest.approx(layers * (0.5 + 20 / 8 / 128) + embeddings, rel=1e-3)
    assert four_bit < 0.4 * full
    note = weights_note(gptq, Dtype.BF16)
    assert note is not None and "4-bit gptq, groups of 128" in note and weights_note(bf16, Dtype.BF16) is None


def test_a_training_length_beyond_the_stated_context_is_refused() -> None:
    with pytest.raises(ValueError, match="seq_len 8192 exceeds max_context_tokens 4096"):
        Transformer(layers=2, hidden=64, ffn_hidden=128, heads=4, vocab=100, seq_len=8192, max_context_tokens=4096)
