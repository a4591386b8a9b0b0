"""What a training case states about its source's counting and routing: a causal attention FLOP count
(``attention_flops``) and a router's groups (``model.moe.groups``, ``group_top_k``)."""

from __future__ import annotations

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.compute.dispatch import network_copy_ratio
from clustersim.errors import ClusterSimError
from clustersim.validation.cases import as_case, default_paths, read_all
from clustersim.validation.training import case_setup, estimate_case, predict_training_case, training_value

CATALOG = load_catalog(use_env=False)
CASES = {case.id: case for case in read_all(default_paths("training.jsonl"))}
BASE = {
    "id": "t",
    "kind": "training",
    "model": {"name": "t", "layers": 8, "hidden": 4096, "ffn_hidden": 14336, "heads": 32, "kv_heads": 8,
              "vocab": 128256, "seq_len": 65536, "ffn_type": "swiglu"},
    "system": {"accelerator": "h100-sxm", "devices": 8, "devices_per_node": 8},
    "parallel": {"tp": 1, "pp": 1, "dp": 2, "cp": 4, "global_batch": 8},
    "measured": {"model_tflops_per_device": 400.0},
}  # fmt: skip


def test_a_causal_count_takes_half_the_attention_matmuls_off_the_model_flops_only():
    causal = {**BASE, "attention_flops": "causal"}
    estimate = estimate_case(BASE, CATALOG)
    full, half = (predict_training_case(c, "model_tflops_per_device", CATALOG) for c in (BASE, causal))
    per_device_s = estimate.step_s * estimate.num_devices
    assert full - half == pytest.approx(estimate.attention_flops_per_step / 2 / per_device_s / 1e12, rel=1e-12)
    assert 0.3 < estimate.attention_flops_per_step / estimate.model_flops_per_step < 0.7  # 64K tokens: a large share
    for field in ("step_time_s", "tokens_per_s_per_device"):  # what the count does not touch
        assert predict_training_case(causal, field, CATALOG) == predict_training_case(BASE, field, CATALOG)
    assert training_value(estimate, "mfu", causal_attention=True) == pytest.approx(
        estimate.mfu * half / full, rel=1e-12
    )


def test_the_megatron_zoo_rows_state_the_count_their_step_times_show():
    """The 4K H100 rows giving step time and TFLOP/s: their product is the causal count, not the full one."""
    checked = 0
    for case in CASES.values():
        if not case.id.startswith("mzoo_") or "step_time_s" not in case.measured:
            continue
        assert case.attention_flops == "causal", case.id
        setup = case_setup(case, CATALOG)
        tokens = setup.job.tokens_per_step
        full = setup.model.model_flops_per_token(setup.job.seq_len) * tokens
        causal = full - 1.5 * setup.model.attention_flops_per_token(setup.job.seq_len) * tokens
        logged = case.measured["model_tflops_per_device"] * 1e12 * case.system.devices * case.measured["step_time_s"]
        assert logged / causal == pytest.approx(1.0, abs=0.01) and logged / full < 0.9
        checked += 1
    assert checked == 5


def test_an_unknown_count_is_refused_by_name():
    with pytest.raises(Exception, match="attention_flops"):
        as_case({**BASE, "attention_flops": "half"})


def test_stated_router_groups_bound_the_nodes_a_dispatch_reaches():
    """AutoModel's benchmark gate sends a token to one aligned block of top_k experts: E / k groups, one chosen."""
    case = CASES["automodel_deepseek-v3_h100_256gpu_pp4_vp8_ep64_fsdp64_bf16"]
    moe = case_setup(case, CATALOG).model.moe
    assert (moe.groups, moe.group_top_k) == (32, 1)
    assert float(network_copy_ratio(moe.experts, moe.top_k, 8, moe.groups, moe.group_top_k)) == pytest.approx(1 / 8)
    moe_model = dict(BASE["model"], moe={"experts": 16, "top_k": 4, "groups": 3})  # 3 does not divide 16
    with pytest.raises(ClusterSimError, match="groups 3 must divide experts 16"):
        case_setup({**BASE, "model": moe_model}, CATALOG)
