"""A MoE search tries the framework's recipes' selective recompute module sets, and a pipelined layout behind the
fastest is balanced before the search picks (``plan.space.offered_module_sets``, ``plan.stage_balance``)."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from clustersim.catalog.registry import load_catalog
from clustersim.choices import RecomputeModule
from clustersim.compute.software import SoftwareProfile, software_for
from clustersim.errors import ClusterSimError
from clustersim.plan.planner import PlanPoint, plan_training
from clustersim.plan.search import choose_layout, rank_layouts
from clustersim.plan.space import SearchSpace, candidate_layouts, offered_module_sets
from clustersim.recompute_layout import bits_modules, module_bits
from clustersim.system import system_for_instance
from clustersim.training.estimate import estimate_training
from clustersim.training.job import TrainingJob
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
MEGATRON = software_for("megatron", "hopper")
TORCHTITAN = software_for("torchtitan", "hopper")
DSV3 = load_model("deepseek-v3", use_env=False)
QWEN3_30B = load_model("qwen3-30b-a3b", use_env=False)
LLAMA_70B = load_model("llama3-70b", use_env=False)
LN_ACT = (RecomputeModule.LAYERNORM, RecomputeModule.MOE_ACT)


def test_the_sets_offered_are_the_recipes_sets_each_model_has():
    sets = MEGATRON.moe_recompute_module_sets
    assert LN_ACT in sets and (RecomputeModule.MLA_UP_PROJ,) in sets
    # DeepSeek-V3 has latent attention and three dense layers: every set; Qwen3-30B-A3B neither
    assert offered_module_sets(DSV3, sets) == sets
    assert offered_module_sets(QWEN3_30B, sets) == (LN_ACT,)
    assert offered_module_sets(LLAMA_70B, sets) == ()  # a dense model: the recipes' sets are MoE recipes'
    assert TORCHTITAN.moe_recompute_module_sets == ()  # modules are Megatron-Core's


def test_a_moe_grid_holds_one_selective_layout_per_set():
    system, job = system_for_instance(CATALOG, "p5.48xlarge", 2), TrainingJob(global_batch=256, seq_len=4096)
    space = SearchSpace(tp=(1,), pp=(1,), ep=(8,), micro_batch=(1,), zero=(1,), module_sets=(LN_ACT,))
    layouts = candidate_layouts(QWEN3_30B, system, job, space)
    kinds = [
        (("full" if f else "selective" if s else "none"), bits_modules(int(b)))
        for f, s, b in zip(layouts.recompute_full, layouts.recompute_selective, layouts.recompute_modules, strict=True)
    ]
    assert len(kinds) == 4 and set(kinds) == {
        ("full", None),
        ("none", None),
        ("selective", None),
        ("selective", LN_ACT),
    }
    # the set as a given layout prices the same
    ranking = rank_layouts(QWEN3_30B, system, job, space=space, software=MEGATRON)
    at = int(np.flatnonzero(ranking.layouts.recompute_modules == module_bits(LN_ACT))[0])
    alone = estimate_training(QWEN3_30B, system, ranking.layouts.layout(at), job, software=MEGATRON)
    assert ranking.step_s[at] == pytest.approx(alone.step_s, rel=1e-12)


def test_the_search_offers_them_only_where_the_framework_and_the_space_allow():
    system, job = system_for_instance(CATALOG, "p5.48xlarge", 2), TrainingJob(global_batch=256, seq_len=4096)
    small = {"tp": (1,), "pp": (1,), "ep": (8,), "micro_batch": (1,), "zero": (1,)}

    def selective_bits(software, **space):
        ranking = rank_layouts(QWEN3_30B, system, job, space=SearchSpace(**small, **space), software=software)
        return set(ranking.layouts.recompute_modules[ranking.layouts.recompute_selective].tolist())

    assert selective_bits(MEGATRON) == {0, module_bits(LN_ACT)}
    assert selective_bits(TORCHTITAN) == {0}
    stated = (RecomputeModule.MOE_ACT,)
    assert selective_bits(MEGATRON, recompute_modules=stated) == {module_bits(stated)}  # stated: only those
    assert selective_bits(MEGATRON, recompute=("none", "full")) == set()
    with pytest.raises(ClusterSimError, match="has no mla_up_proj"):
        selective_bits(MEGATRON, module_sets=((RecomputeModule.MLA_UP_PROJ,),))
    with pytest.raises(ClusterSimError, match="need selective recompute"):
        selective_bits(MEGATRON, recompute=("full",), module_sets=(LN_ACT,))


def test_a_profile_with_sets_names_their_source():
    fields = MEGATRON.model_dump() | {"moe_recompute_sets_source": None}
    with pytest.raises(ValidationError, match="moe_recompute_sets_source"):
        SoftwareProfile(**fields)
    with pytest.raises(ValidationError, match="one module or more"):
        SoftwareProfile(**(MEGATRON.model_dump() | {"moe_recompute_module_sets": [[]]}))


def test_a_pipeline_that_overtakes_once_balanced_is_chosen():
    """DeepSeek-V3 on 512 H100: the fastest even split is pp 1 with full recompute; a pp 8 layout behind it, its
    last rank made lighter by the output head's worth, is faster, and the search picks it."""
    system, job = system_for_instance(CATALOG, "p5.48xlarge", 64), TrainingJob(global_batch=1024, seq_len=4096)
    ranking = rank_layouts(DSV3, system, job, software=MEGATRON)
    ((fastest_even, fastest_even_s),) = ranking.fastest(1)
    chosen = choose_layout(DSV3, system, job, software=MEGATRON)
    chosen_s = estimate_training(DSV3, system, chosen, job, software=MEGATRON).step_s
    assert fastest_even.pp == 1 and chosen.pp > 1 and chosen.last_stage_layers is not None
    assert chosen_s < 0.9 * fastest_even_s
    assert chosen.recompute.value == "selective" and chosen.recompute_modules  # one of the recipes' sets
    # held to even stages, the search keeps the fastest even split
    even = choose_layout(DSV3, system, job, space=SearchSpace(uneven_stages=False), software=MEGATRON)
    assert even.last_stage_layers is None
    assert estimate_training(DSV3, system, even, job, software=MEGATRON).step_s <= chosen_s * 1.5


def test_the_planner_picks_the_pipeline_that_overtakes_too():
    """The planner keeps each point's fastest layouts after balancing the same pool: its top row is the balanced
    pipeline, priced as the single-layout path prices it."""
    system = system_for_instance(CATALOG, "p5.48xlarge", 64)
    job = TrainingJob(global_batch=1024, seq_len=4096, tokens=1024 * 4096 * 1000.0)
    point = PlanPoint(system, "p5.48xlarge", 64, job, MEGATRON)
    best = plan_training(DSV3, [point], top=1).top[0]
    layout = best.estimate.layout
    assert layout.pp > 1 and layout.last_stage_layers is not None
    assert layout.describe() == choose_layout(DSV3, system, job, software=MEGATRON).describe()
    alone = estimate_training(DSV3, system, layout, job, software=MEGATRON)
    assert best.estimate.step_s == pytest.approx(alone.step_s, rel=1e-9)
