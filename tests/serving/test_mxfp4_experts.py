"""gpt-oss's release: its routed experts stored in MXFP4 (4 bits a weight, an 8-bit E8M0 scale per 32), every other
weight in bf16 (``quantization.MXFP4_EXPERTS``), as the Hugging Face config's ``quantization_config`` states it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import serving_system_for_accelerator, step_times
from clustersim.serving.formats import BlockFp4
from clustersim.serving.memory import expert_weight_bytes, layer_weight_bytes, weight_bytes_per_device, weights_note
from clustersim.workload.hf import read_hf_config
from clustersim.workload.quantization import MXFP4_EXPERTS, Quantization, QuantMethod
from clustersim.workload.transformer import Transformer
from clustersim.workload.zoo import load_model
from tests.workload.hf_configs_2025 import GPT_OSS_20B, GPT_OSS_120B

CATALOG = load_catalog(use_env=False)
GIB = 2**30


def _release(tmp_path: Path, config: dict) -> Transformer:
    """The release read from its config.json, in a folder named as the zoo names the model."""
    folder = tmp_path / ("gpt-oss-120b" if config is GPT_OSS_120B else "gpt-oss-20b")
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return read_hf_config(folder / "config.json")


@pytest.mark.parametrize(("config", "published_gib"), [(GPT_OSS_120B, 60.8), (GPT_OSS_20B, 12.8)])
def test_the_release_holds_the_model_cards_checkpoint_size(tmp_path: Path, config: dict, published_gib: float):
    """The gpt-oss model card (arXiv 2508.10925, Table 1): checkpoints of 60.8 and 12.8 GiB, the experts' MXFP4
    weights and scales with everything else in bf16; the bf16 model that trains holds 3.0-3.6 times as much."""
    release = _release(tmp_path, config)
    held = weight_bytes_per_device(release, Dtype.BF16) / GIB
    assert held == pytest.approx(published_gib, abs=0.05)
    assert weight_bytes_per_device(load_model(release.name, use_env=False), Dtype.BF16) / GIB > 3 * held
    # the experts are as stored at any GEMM precision, and so are the 16-bit weights the release keeps
    assert weight_bytes_per_device(release, Dtype.FP8) == weight_bytes_per_device(release, Dtype.BF16)
    assert weight_bytes_per_device(release, BlockFp4.MXFP4) == weight_bytes_per_device(release, Dtype.BF16)
    assert (expert_weight_bytes(release, Dtype.BF16), layer_weight_bytes(release, Dtype.FP8)) == (4.25 / 8, 2.0)
    # tensor and expert parallel split them
    assert weight_bytes_per_device(release, Dtype.BF16, tp=2) == pytest.approx(held * GIB / 2)


def test_a_decode_step_reads_the_experts_at_their_stored_width(tmp_path: Path):
    release = _release(tmp_path, GPT_OSS_120B)
    bf16 = load_model("gpt-oss-120b", use_env=False)
    h100 = serving_system_for_accelerator(CATALOG, "h100-sxm", tp=1, devices_per_node=8)
    args = dict(decode_sequences=64, decode_context_tokens=2048, prefill_tokens=0.0, prefill_sequences=0.0,
                prompt_tokens=1024.0)  # fmt: skip
    stored, whole = (step_times(m, h100, Dtype.BF16, Dtype.BF16, **args).gemm_memory_s for m in (release, bf16))
    assert float(stored) < 0.45 * float(whole)  # 4.25 bits for the experts that dominate what a step reads
    note = weights_note(release, Dtype.BF16)
    assert note is not None and "routed experts are held and read at 0.531 bytes each" in note
    assert "other weights in 16 bits; GEMMs at bf16" in note


def test_formats_the_release_is_not_stored_in_are_refused(tmp_path: Path):
    release = _release(tmp_path, GPT_OSS_120B)
    with pytest.raises(ClusterSimError, match=r"precision: nvfp4 prices weights stored as nvfp4, but gpt-oss-120b is a "
                       r"4-bit mxfp4, groups of 32, routed experts only checkpoint \(valid for it: bf16, fp16, fp8 "
                       r"GEMMs, mxfp4\)"):  # fmt: skip
        weight_bytes_per_device(release, BlockFp4.NVFP4)
    gptq = Quantization(method=QuantMethod.GPTQ, bits=4, group_size=128)
    with pytest.raises(ClusterSimError, match=r"valid for it: bf16, fp16, fp8 GEMMs\)"):
        layer_weight_bytes(release.model_copy(update={"quantization": gptq}), BlockFp4.MXFP4)
    with pytest.raises(ClusterSimError, match="training is priced for 16-bit weights"):
        release.check_unquantized("training")


def test_mxfp4_is_its_own_layout_and_experts_only_needs_experts():
    assert MXFP4_EXPERTS.bytes_per_weight == 0.53125 and MXFP4_EXPERTS.describe().endswith("routed experts only")
    with pytest.raises(ValueError, match="mxfp4 stores 4 bits a weight in groups of 32 with one 8-bit scale"):
        Quantization(method=QuantMethod.MXFP4, bits=4, group_size=16, zero_point=False, scale_bits=8)
    with pytest.raises(ValueError, match="scale_bits 4 is not modelled"):
        Quantization(method=QuantMethod.GPTQ, bits=4, group_size=128, scale_bits=4)
    dense = dict(name="d", layers=2, hidden=64, ffn_hidden=128, heads=4, vocab=100, ffn_type="swiglu")
    with pytest.raises(ValueError, match="experts_only needs a MoE model"):
        Transformer(**dense, quantization=MXFP4_EXPERTS)
    # a 16-bit scale per group of 128 as before: GPTQ's 4 bits + (16 + 4) / 128
    assert Quantization(method=QuantMethod.GPTQ, bits=4, group_size=128).bytes_per_weight == 0.5 + 20 / 8 / 128
