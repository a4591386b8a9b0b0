"""MLPerf Training v6.0 (2026), held out of every fit: one recipe run by four submitters on a GB300 NVL72 rack, and
DeepSeek-V3 as CoreWeave scales it from 2,048 to 8,192 GB300, predicted out of sample."""

from __future__ import annotations

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.validation.cases import default_paths, read_all
from clustersim.validation.manifest import fitted_on_by_kind
from clustersim.validation.training import predict_training_case

RACK_8B = "mlperft60_llama3.1-8b_gb300_72gpu_{}_tp1pp1cp1_nvfp4"
SUBMITTERS = ("nvidia", "nebius", "oracle", "lambda")
DSV3 = "mlperft60_deepseek-v3_gb300_{}gpu_coreweave_tp1pp4vp4ep32_mxfp8"
SCALES = (2048, 4096, 8192)
FIELD = "tokens_per_s_per_device"


@pytest.fixture(scope="module")
def measured_and_predicted() -> dict[str, tuple[float, float]]:
    catalog = load_catalog(use_env=False)
    cases = {c.id: c for c in read_all(default_paths("training.jsonl"))}
    wanted = [RACK_8B.format(s) for s in SUBMITTERS] + [DSV3.format(g) for g in SCALES]
    return {i: (cases[i].measured[FIELD], predict_training_case(cases[i], FIELD, catalog)) for i in wanted}


def test_no_fit_has_seen_them(measured_and_predicted):
    fitted = fitted_on_by_kind(use_env=False)["training"]
    assert fitted and not set(measured_and_predicted) & fitted


def test_one_recipe_on_four_submitters_racks(measured_and_predicted):
    """The same config (NVIDIA's GB300 18x4x1 NVFP4 recipe): the submitters agree within 1.5%, and the model is
    within 8% of each (6-8% slow: Blackwell Ultra's runs are predicted slow; 1.5 points of it since the logits GEMM
    runs in BF16, as Megatron-Core's head does outside an MXFP8 fp8_output_proj run, 2026-12-05)."""
    runs = [measured_and_predicted[RACK_8B.format(s)] for s in SUBMITTERS]
    measured = [m for m, _ in runs]
    assert max(measured) / min(measured) < 1.015
    for measured_rate, predicted in runs:
        assert predicted == pytest.approx(measured_rate, rel=0.08)


def test_deepseek_v3_as_coreweave_scales_it(measured_and_predicted):
    """At TP1 PP4 VP4 EP32 and a global batch of 16,384 sequences, the data-parallel degree grows 512 -> 2,048 and the
    micro-batches per step fall 32 -> 8. Measured 5,226 -> 4,810 tokens/s per GPU (0.920); each run within 12%."""
    rates = {g: measured_and_predicted[DSV3.format(g)] for g in SCALES}
    for measured, predicted in rates.values():
        assert predicted == pytest.approx(measured, rel=0.12)
    measured_ratio = rates[8192][0] / rates[2048][0]
    predicted_ratio = rates[8192][1] / rates[2048][1]
    assert measured_ratio == pytest.approx(0.920, abs=0.002)
    assert predicted_ratio == pytest.approx(measured_ratio, abs=0.03)
