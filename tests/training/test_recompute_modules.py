"""Selective recompute by module (Megatron-Core's ``recompute_modules``): what each module runs again in the
backward pass and what it gives back in memory, and the layouts and cases that state them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from clustersim import validation
from clustersim.catalog.registry import load_catalog
from clustersim.choices import RecomputeModule
from clustersim.compute.memory import layer_activation_bytes
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, LayoutArrays, Recompute
from clustersim.recompute_layout import modules_in
from clustersim.system import system_for_instance
from clustersim.training.estimate import estimate_training
from clustersim.training.job import TrainingJob
from clustersim.validation.cases import read_cases
from clustersim.validation.training import estimate_case
from clustersim.workload.ops import layer_operations, module_recompute_share
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
DSV3 = load_model("deepseek-v3", use_env=False)
LLAMA = load_model("llama3-8b", use_env=False)
SYSTEM = system_for_instance(CATALOG, "p5.48xlarge", 32)  # 256 H100
JOB = TrainingJob(global_batch=1024, seq_len=4096)


def _estimate(*modules: str, model=DSV3, recompute=Recompute.SELECTIVE):
    layout = dict(tp=2, pp=16, dp=8, ep=16, zero=1, sequence_parallel=True, recompute=recompute, uneven_stages=True)
    if model is LLAMA:
        layout.update(pp=1, dp=128, ep=1)
    stated = tuple(RecomputeModule(m) for m in modules) or None
    return estimate_training(model, SYSTEM, Layout(**layout, recompute_modules=stated), JOB)


def _recompute_s(estimate) -> float:
    return next(t.exposed_s for t in estimate.terms if t.name == "recompute")


def _ops(model):
    one = np.ones(1)
    return layer_operations(model, tokens=one, seq_len=4096, tp=one, sp_split=one, ep=one, fused_attention=True)


def test_core_attn_is_megatrons_default_and_each_module_adds_its_own_time():
    default, core = _estimate(), _estimate("core_attn")
    assert (core.step_s, core.memory.activations_bytes) == (default.step_s, default.memory.activations_bytes)
    singles = {m: _recompute_s(_estimate(m)) for m in ("core_attn", "mla_up_proj", "layernorm", "moe_act", "moe")}
    assert all(v > 0 for v in singles.values())
    both = _recompute_s(_estimate("mla_up_proj", "moe_act"))
    assert both == pytest.approx(singles["mla_up_proj"] + singles["moe_act"], rel=1e-9)
    assert singles["moe_act"] < singles["moe"] < _recompute_s(_estimate(recompute=Recompute.FULL))
    # DeepSeek-V3's MLA up projections are cheaper to rebuild at 4k tokens than its attention core
    assert singles["mla_up_proj"] < singles["core_attn"]


def test_the_mla_up_projection_share_is_its_weights_share_of_the_qkv_matmuls():
    qkv = next(op for op in _ops(DSV3) if op.name == "qkv")
    # q up 1536 x 128 x 192, kv up 512 x 128 x (128 + 128) over all the Q/K/V weights, down projections included
    expected = (1536 * 128 * 192 + 512 * 128 * 256) / (7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256)
    assert module_recompute_share(DSV3, qkv, RecomputeModule.MLA_UP_PROJ) == pytest.approx(expected)
    assert expected == pytest.approx(0.7827, abs=1e-4)


def test_the_moe_activation_splits_into_routed_and_shared_experts():
    act = next(op for op in _ops(DSV3) if op.name == "bias and activation")
    share = {m: module_recompute_share(DSV3, act, m) for m in RecomputeModule}
    assert share[RecomputeModule.MOE] == pytest.approx(
        share[RecomputeModule.MOE_ACT] + share[RecomputeModule.SHARED_EXPERTS]
    )
    assert share[RecomputeModule.MOE_ACT] == pytest.approx(8 * share[RecomputeModule.SHARED_EXPERTS])  # top 8, 1 shared
    assert share[RecomputeModule.CORE_ATTN] == 0.0 and 0.0 < share[RecomputeModule.MLP] < share[RecomputeModule.MOE]
    assert sum(share[m] for m in (RecomputeModule.MOE, RecomputeModule.MLP)) < 1.0  # the attention's passes stay


def test_each_module_gives_back_memory_and_more_modules_give_back_more():
    default = _estimate().memory.activations_bytes
    held = {m: _estimate(m).memory.activations_bytes for m in ("mla_up_proj", "layernorm", "moe_act", "moe")}
    assert all(v < default for v in held.values())
    assert held["moe"] < held["moe_act"]
    assert _estimate("mla_up_proj", "moe").memory.activations_bytes < min(held["mla_up_proj"], held["moe"])
    # one layer gives back MLA's up-projected queries, keys and values: 128 x (192 + 192 + 128) elements a token,
    # 2 bytes each, split over tp 2
    lay = LayoutArrays.of([Layout(tp=2, recompute=Recompute.SELECTIVE, recompute_modules=(m,)) for m in (
        RecomputeModule.CORE_ATTN, RecomputeModule.MLA_UP_PROJ)])  # fmt: skip
    core, up = layer_activation_bytes(DSV3, lay, seq_len=4096, fused=True)
    assert core - up == pytest.approx(2 * 4096 * 128 * 512 / 2)


@pytest.mark.parametrize(
    ("modules", "recompute", "message"),
    [
        (("mla_up_proj",), Recompute.SELECTIVE, "llama3-8b has no mla_up_proj to recompute (valid for it: core_attn, "
         "layernorm, mlp)"),
        (("moe",), Recompute.SELECTIVE, "llama3-8b has no moe to recompute"),
        (("layernorm",), Recompute.FULL, "recompute modules need selective recompute, not full"),
        (("core_attn",), Recompute.NONE, "recompute modules need selective recompute, not none"),
    ],
)  # fmt: skip
def test_modules_a_layout_cannot_run_are_refused(modules, recompute, message):
    with pytest.raises(ClusterSimError, match=re.escape(message)) as err:
        _estimate(*modules, model=LLAMA, recompute=recompute)
    assert err.value.field == "recompute_modules"


def test_the_modules_each_model_has():
    assert modules_in(LLAMA) == (RecomputeModule.CORE_ATTN, RecomputeModule.LAYERNORM, RecomputeModule.MLP)
    assert set(modules_in(DSV3)) == set(RecomputeModule)  # MLA, shared experts and three dense layers
    assert RecomputeModule.MLP not in modules_in(load_model("qwen3-235b-a22b", use_env=False))


def test_layouts_keep_their_modules_through_the_arrays():
    stated = Layout(
        recompute=Recompute.SELECTIVE, recompute_modules=(RecomputeModule.MOE_ACT, RecomputeModule.LAYERNORM)
    )
    arrays = LayoutArrays.of([stated, Layout()])
    assert set(arrays.layout(0).recompute_modules or ()) == {RecomputeModule.MOE_ACT, RecomputeModule.LAYERNORM}
    assert arrays.layout(1).recompute_modules is None
    assert "recompute selective (moe_act layernorm)" in stated.describe()


def test_a_case_may_state_its_modules():
    path = Path(validation.__file__).parent / "project" / "training.jsonl"
    row = next(json.loads(line) for line in path.read_text().splitlines() if '"mbridge260601_deepseek-v3_gb200' in line)
    assert row["parallel"]["recompute"] == "selective" and row["parallel"]["recompute_modules"] == ["mla_up_proj"]
    unstated = dict(row, parallel={k: v for k, v in row["parallel"].items() if k != "recompute_modules"})
    default, up = estimate_case(unstated, CATALOG), estimate_case(row, CATALOG)
    assert up.step_s < default.step_s  # the up projections, not the attention core, run again
    bad = dict(row, parallel=dict(row["parallel"], recompute_modules=["up_proj"]))
    with pytest.raises(ClusterSimError, match="recompute_modules"):
        estimate_case(bad, CATALOG)
    assert read_cases(path)  # the packaged file still reads
