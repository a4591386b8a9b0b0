"""The memory a serving engine leaves unused: SGLang's own rules by release (its ServerArgs), a stated share
winning over a rule, and the KV pool that follows."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.errors import CatalogFileError
from clustersim.serving.engine import serving_system_for_accelerator
from clustersim.serving.engines import EngineProfile, engine_for_software, engine_profile, engine_profiles
from clustersim.serving.memory_plan import memory_plan, reserved_fraction
from clustersim.serving.reserved_memory import rule_reserved_fraction
from clustersim.validation.cases import CaseEngineSettings
from clustersim.validation.engine_settings import engine_with_settings
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
GIB = 2**30
QWEN3_32B = load_model("qwen3-32b", use_env=False)


def _static(memory_gib: float, tp: int = 1, chunk: int = 8192, attention_dp: int = 1) -> float:
    """SGLang's mem_fraction_static under its 0.5.3 rule."""
    reserved = rule_reserved_fraction(
        "sglang-gpu-memory", memory_gib * GIB, tp=tp, pp=1, attention_dp=attention_dp, chunk_tokens=chunk
    )
    return 1.0 - reserved


def test_sglang_keeps_back_its_activations_graphs_and_metadata_by_the_devices_memory():
    # 80 GiB (81,920 MiB), TP1: 512 + 1.5 x 8192 + 2 x 256 + 1024 / 8 = 13,440 MiB; TP8's graphs hold 512
    assert _static(80) == pytest.approx(round((81920 - 13440) / 81920, 3))
    assert _static(80, tp=8) == pytest.approx(round((81920 - (512 + 12288 + 1024 + 1024)) / 81920, 3))
    assert _static(141) > _static(80) > _static(80, tp=8)  # more memory keeps a smaller share back
    # a B200's chunk of 16,384 tokens: 512 + 24,576 + 1,024 + 128
    assert _static(180, chunk=16384) == pytest.approx(round((184320 - 26240) / 184320, 3))
    # DP attention pads each group's graphs: 3 x 512 x 8 and half again above a graph batch of 300
    dep8 = 512 + 12288 + 1024 + 1024 + 3 * 512 * 8 + 1.5 * 512 * 8
    assert _static(141, attention_dp=8) == pytest.approx(round((141 * 1024 - dep8) / (141 * 1024), 3))
    # at least 10 GiB back on a device above 60 GiB, whatever the chunk
    assert _static(80, chunk=2048) == pytest.approx(round((81920 - 10240) / 81920, 3))
    # a small device's classes: 24 GiB keeps 512 + 3,072 + 48 + 128 back at TP1, no floor
    assert _static(24, chunk=2048) == pytest.approx(round((24576 - 3760) / 24576, 3))


@pytest.mark.parametrize(("tp", "static"), [(1, 0.88), (2, 0.87), (3, 0.87), (4, 0.85), (8, 0.81), (16, 0.79)])
def test_sglang_0_3_sets_its_static_share_by_tensor_parallel_size(tp: int, static: float):
    reserved = rule_reserved_fraction("sglang-tp", 80 * GIB, tp=tp, pp=1, attention_dp=1, chunk_tokens=8192)
    assert 1.0 - reserved == pytest.approx(static)


@pytest.mark.parametrize(
    ("version", "profile", "rule"),
    [
        ("SGLang v0.3.0", "sglang-v0-3", "sglang-tp"),
        ("SGLang v0.5.5.post1", "sglang-v0-5", "sglang-gpu-memory"),
        (None, "sglang", "sglang-gpu-memory"),
    ],
)
def test_a_case_gets_the_rule_of_its_release(version: str | None, profile: str, rule: str):
    engine = engine_for_software("sglang", version)
    assert (engine.name, engine.reserved_memory_rule, engine.reserved_memory_fraction) == (profile, rule, None)


def test_the_kv_pool_is_the_static_share_less_the_weights():
    """SGLang's static share holds the weights and the KV pool; its activations and graphs are in what the rule
    keeps back, so no workspace comes off again (TensorRT-LLM's stated share keeps its workspace inside)."""
    system = serving_system_for_accelerator(CATALOG, "h100-sxm", tp=1)
    plan = memory_plan(QWEN3_32B, system, Dtype.BF16, Dtype.BF16, engine="sglang")
    static = 1.0 - reserved_fraction(engine_profile("sglang"), system)
    assert static == pytest.approx(_static(80))
    assert plan.workspace_bytes == 0.0
    assert plan.kv_budget_bytes == pytest.approx(80 * GIB * static - plan.weights_bytes)
    trt = memory_plan(QWEN3_32B, system, Dtype.BF16, Dtype.BF16, engine="tensorrt-llm")
    assert trt.workspace_bytes > 0 and trt.kv_budget_bytes < trt.memory_bytes - trt.weights_bytes


def test_a_stated_share_wins_over_the_engines_rule(tmp_path: Path):
    system = serving_system_for_accelerator(CATALOG, "h100-sxm", tp=4)
    run = engine_with_settings(engine_profile("sglang"), CaseEngineSettings(reserved_memory_fraction=0.15))
    assert reserved_fraction(run, system) == 0.15
    # --mem-fraction-static stated is still the weights' and KV pool's share: the activations sit in the rest
    plan = memory_plan(QWEN3_32B, system, Dtype.BF16, Dtype.BF16, engine=run)
    assert plan.workspace_bytes == 0.0 and plan.kv_budget_bytes == pytest.approx(80 * GIB * 0.85 - plan.weights_bytes)
    mine = tmp_path / "engines.toml"
    mine.write_text('[sglang]\nreserved_memory_fraction = 0.2\nsource = "--mem-fraction-static 0.8"\n')
    assert reserved_fraction(engine_profiles([mine], use_env=False)["sglang"], system) == 0.2


def test_a_profile_without_a_share_or_a_rule_is_refused(tmp_path: Path):
    path = tmp_path / "bad.toml"
    path.write_text('[mine]\nbased_on = "sglang"\nreserved_memory_rule = "sglang-other"\nsource = "x"\n')
    with pytest.raises(CatalogFileError, match=r"mine.*reserved_memory_rule.*sglang-tp"):
        engine_profiles([path], use_env=False)
    neither = engine_profile("sglang").model_dump() | {"reserved_memory_rule": None}
    with pytest.raises(ValidationError, match="give reserved_memory_fraction or reserved_memory_rule"):
        EngineProfile.model_validate(neither)
    path.write_text("[vllm]\nreserved_memory_fraction = 1.2\n")
    with pytest.raises(CatalogFileError, match=r"vllm.*reserved_memory_fraction.*less than 1"):
        engine_profiles([path], use_env=False)
