"""An engine profile's own constants where its runs differ from the reference's: ``kernel_efficiency_on`` (per
accelerator) and ``gemm_half_tokens`` (its GEMMs' small-batch cost); absent, the profile's
``kernel_efficiency`` and the calibration's value apply."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import default_calibration, serving_system_for_accelerator, step_times
from clustersim.serving.engines import EngineProfile, engine_profile, engine_profiles
from clustersim.serving.steps import StepTimes
from clustersim.workload.transformer import Transformer

CATALOG = load_catalog(use_env=False)
LLAMA = Transformer(name="llama3.1-8b", layers=32, hidden=4096, ffn_hidden=14336, heads=32, kv_heads=8, vocab=128256)
BARE = engine_profile("nxd-inference").model_copy(update={"kernel_efficiency_on": {}, "gemm_half_tokens": None})


def _step(engine: EngineProfile, chip: str, decoding: float = 8.0, prompt: float = 0.0) -> StepTimes:
    system = serving_system_for_accelerator(CATALOG, chip, tp=4, devices_per_node=64 if chip == "trainium2" else 32)
    return step_times(
        LLAMA, system, Dtype.BF16, Dtype.BF16, decode_sequences=decoding, decode_context_tokens=1024.0,
        prefill_tokens=prompt, prefill_sequences=1.0 if prompt else 0.0, prompt_tokens=max(prompt, 1.0), engine=engine,
    )  # fmt: skip


def test_a_per_accelerator_efficiency_applies_on_that_chip_only() -> None:
    on_trn2 = BARE.model_copy(update={"kernel_efficiency_on": {"trainium2": 1.0}})
    everywhere = BARE.model_copy(update={"kernel_efficiency": 1.0})
    prompt = 2048.0  # compute-bound: the efficiency shows
    assert float(_step(on_trn2, "trainium2", 0, prompt).step_s) == pytest.approx(
        float(_step(everywhere, "trainium2", 0, prompt).step_s)
    )
    assert float(_step(on_trn2, "trainium1", 0, prompt).step_s) == float(_step(BARE, "trainium1", 0, prompt).step_s)
    assert float(_step(on_trn2, "trainium2", 0, prompt).step_s) < float(_step(BARE, "trainium2", 0, prompt).step_s)


@settings(max_examples=15, deadline=None)
@given(st.floats(0.0, 1024.0))
def test_the_engines_gemm_half_tokens_replaces_the_calibrations(half: float) -> None:
    reference = default_calibration().gemm_half_tokens
    same = BARE.model_copy(update={"gemm_half_tokens": reference})
    assert float(_step(same, "trainium2").gemm_compute_s) == pytest.approx(
        float(_step(BARE, "trainium2").gemm_compute_s)
    )
    low = float(_step(BARE.model_copy(update={"gemm_half_tokens": half}), "trainium2").gemm_compute_s)
    high = float(_step(BARE.model_copy(update={"gemm_half_tokens": half + 100.0}), "trainium2").gemm_compute_s)
    assert high > low  # more rows' worth of cost at a small batch


def test_a_user_file_sets_them_and_bad_values_are_refused(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text(
        '[mine]\nbased_on = "nxd-inference"\nkernel_efficiency_on = { trainium2 = 0.9 }\ngemm_half_tokens = 64\n'
    )
    mine = engine_profiles([good], use_env=False)["mine"]
    assert (
        mine.kernel_efficiency_for("trainium2") == 0.9
        and mine.kernel_efficiency_for("trainium1") == mine.kernel_efficiency
    )
    bad = tmp_path / "bad.toml"
    bad.write_text('[bad]\nbased_on = "nxd-inference"\nkernel_efficiency_on = { trainium2 = 1.5 }\n')
    with pytest.raises(ClusterSimError, match="kernel_efficiency_on"):
        engine_profiles([bad], use_env=False)
