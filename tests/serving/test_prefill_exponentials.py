"""A prompt's attention core is priced as the training step prices its own (clustersim.compute.attention_kernel):
the products at attention_flop_efficiency of the cache format's peak, then one exponential per score and query head,
the family's exposed share, at the catalog's exp_per_s."""

from __future__ import annotations

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.compute.efficiency import efficiency_for
from clustersim.serving.engine import DEFAULT_CALIBRATION, serving_system_for_accelerator, step_times
from clustersim.serving.engines import engine_profile
from clustersim.workload.transformer import Transformer

CATALOG = load_catalog(use_env=False)
PROMPT = 4096.0


def _model(head_dim: int) -> Transformer:
    """Queries 4,096 wide in heads of ``head_dim``: the same FLOPs per (query, key) pair, more scores per FLOP in
    narrow heads."""
    heads = 4096 // head_dim
    return Transformer(
        name=f"hd{head_dim}", layers=8, hidden=4096, ffn_hidden=14336, heads=heads, kv_heads=heads // 4,
        head_dim=head_dim, vocab=32000, ffn_type="swiglu",
    )  # fmt: skip


def _attention_s(model: Transformer, accelerator: str, cache: Dtype = Dtype.BF16) -> float:
    system = serving_system_for_accelerator(CATALOG, accelerator, tp=1)
    step = step_times(
        model, system, Dtype.BF16, cache, decode_sequences=0.0, decode_context_tokens=0.0, prefill_tokens=PROMPT,
        prefill_sequences=1.0, prompt_tokens=PROMPT, cal=DEFAULT_CALIBRATION, engine="tensorrt-llm",
    )  # fmt: skip
    return float(step.prefill_attention_s)


def _products_s(model: Transformer, accelerator: str, cache: Dtype = Dtype.BF16) -> float:
    """The products alone at attention_flop_efficiency of the format's peak: 2 (q + context) per pair and layer."""
    peak = CATALOG.accelerator(accelerator).dense_flop_per_s[cache].value
    pairs = model.layers * PROMPT**2 / 2
    return pairs * 2 * (model.q_width + model.context_width) / (peak * DEFAULT_CALIBRATION.attention_flop_efficiency)


def _exponentials_s(model: Transformer, accelerator: str) -> float:
    chip = CATALOG.accelerator(accelerator)
    pairs = model.layers * PROMPT**2 / 2
    exposed = efficiency_for(chip).softmax_exposed
    return pairs * model.heads * exposed / (chip.exp_per_s.value * DEFAULT_CALIBRATION.attention_flop_efficiency)


def test_the_core_is_its_products_and_its_exposed_exponentials():
    for accelerator in ("h100-sxm", "b200", "b300"):
        model = _model(128)
        expected = _products_s(model, accelerator) + _exponentials_s(model, accelerator)
        assert _attention_s(model, accelerator) == pytest.approx(expected, rel=1e-9)


def test_a_narrow_head_pays_more_per_flop_as_flashattention_3_measures():
    """FlashAttention-3's H100 forward: 497 TFLOP/s at head dim 64 against 648 at 128 (0.77; Shah et al. 2024,
    figure 5); products alone would give 1."""
    ratio = _attention_s(_model(128), "h100-sxm") / _attention_s(_model(64), "h100-sxm")
    assert ratio == pytest.approx(497 / 648, rel=0.03)


def test_an_fp8_core_gains_less_than_its_doubled_product_rate():
    """The exponentials do not speed up with the format: 1.46 / 0.96 at head dim 128 on an H100, not 2."""
    model = _model(128)
    gain = _attention_s(model, "h100-sxm", Dtype.BF16) / _attention_s(model, "h100-sxm", Dtype.FP8)
    products, exponentials = _products_s(model, "h100-sxm"), _exponentials_s(model, "h100-sxm")
    fp8_products = _products_s(model, "h100-sxm", Dtype.FP8)  # the FP8 peak: twice the 16-bit one
    assert gain == pytest.approx((products + exponentials) / (fp8_products + exponentials), rel=1e-9)
    assert 1.4 < gain < 1.6


def test_blackwell_ultras_doubled_exponential_rate_shortens_the_core():
    """B300 and B200 quote the same 16-bit peak; B300's special function units take twice the exponentials."""
    model = _model(64)
    b200, b300 = _attention_s(model, "b200"), _attention_s(model, "b300")
    assert b300 < b200
    assert b200 - b300 == pytest.approx(_exponentials_s(model, "b200") - _exponentials_s(model, "b300"), rel=1e-9)
    assert _exponentials_s(model, "b300") == pytest.approx(_exponentials_s(model, "b200") / 2, rel=0.01)


def test_a_native_kernel_and_a_chip_without_an_exponential_rate_pay_the_products_alone():
    model = _model(128)
    native = engine_profile("tensorrt-llm").model_copy(update={"score_bytes": 13.0})
    system = serving_system_for_accelerator(CATALOG, "h100-sxm", tp=1)
    step = step_times(
        model, system, Dtype.BF16, Dtype.BF16, decode_sequences=0.0, decode_context_tokens=0.0, prefill_tokens=PROMPT,
        prefill_sequences=1.0, prompt_tokens=PROMPT, cal=DEFAULT_CALIBRATION, engine=native,
    )  # fmt: skip
    bandwidth = CATALOG.accelerator("h100-sxm").memory_bandwidth_bytes_per_s.value * DEFAULT_CALIBRATION.hbm_efficiency
    scores = native.native_score_bytes(PROMPT, model.heads * model.layers) / bandwidth
    assert float(step.prefill_attention_s) == pytest.approx(_products_s(model, "h100-sxm") + scores, rel=1e-9)
    assert CATALOG.accelerator("trainium1").exp_per_s is None
