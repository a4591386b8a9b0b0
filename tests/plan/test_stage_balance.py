"""A chosen pipeline's last rank made lighter by the output head's worth (``plan.stage_balance``)."""

from __future__ import annotations

import json

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.compute.software import software_for
from clustersim.execution import Layout
from clustersim.plan.search import choose_layout
from clustersim.plan.space import SearchSpace
from clustersim.plan.stage_balance import MAX_LAYERS_OFF, balance_last_stages, lighter_last_stages, uneven_allowed
from clustersim.system import system_for_instance
from clustersim.training.estimate import estimate_training
from clustersim.training.job import TrainingJob
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
LLAMA_405B = load_model("llama3.1-405b", use_env=False)
DSV3 = load_model("deepseek-v3", use_env=False)
MEGATRON = software_for("megatron", "hopper")
P5_256 = system_for_instance(CATALOG, "p5.48xlarge", 256)
JOB = TrainingJob(global_batch=512, seq_len=8192)
PP16 = Layout(tp=8, pp=16, vp=4, dp=16, zero=1, recompute="full", uneven_stages=True)


def test_the_lighter_splits_start_one_layer_under_the_even_share_and_keep_every_rank_a_layer():
    # 126 layers over 64 chunks: 2 a chunk, 8 on the last rank; tried 7 down to 8 - MAX_LAYERS_OFF
    counts = [v.last_stage_layers for v in lighter_last_stages(LLAMA_405B, PP16)]
    assert counts == list(range(7, 8 - MAX_LAYERS_OFF - 1, -1))
    # DeepSeek-V3 at pp 4 vp 4: 16 a rank with the MTP block, so 15 decoder layers; 14 down to 9
    dsv3 = Layout(pp=4, vp=4, dp=64, ep=64, uneven_stages=True)
    assert [v.last_stage_layers for v in lighter_last_stages(DSV3, dsv3)] == list(range(14, 8, -1))
    assert lighter_last_stages(LLAMA_405B, Layout(tp=8, dp=32)) == []  # no pipeline
    assert lighter_last_stages(LLAMA_405B, PP16.model_copy(update={"last_stage_layers": 7})) == []  # stated


def test_a_lighter_last_rank_is_kept_only_where_its_step_is_shorter():
    usable = P5_256.memory_bytes
    even_s = estimate_training(LLAMA_405B, P5_256, PP16, JOB, software=MEGATRON).step_s
    ((balanced, balanced_s),) = balance_last_stages(
        LLAMA_405B, P5_256, JOB, [(PP16, even_s)], usable_bytes=usable, software=MEGATRON
    )
    assert balanced.last_stage_layers is not None and balanced.last_stage_layers < 8
    step = {
        name: estimate_training(LLAMA_405B, P5_256, layout, JOB, software=MEGATRON).step_s
        for name, layout in (("even", PP16), ("balanced", balanced))
    }
    assert step["balanced"] < step["even"] and balanced_s == pytest.approx(step["balanced"], rel=1e-9)
    for variant in lighter_last_stages(LLAMA_405B, PP16):  # the kept one is the shortest of those tried
        assert estimate_training(LLAMA_405B, P5_256, variant, JOB, software=MEGATRON).step_s >= step["balanced"]
    # a head worth little over two stages of 16 layers: a lighter last rank gives the other 17, so the even split stays
    small_head = load_model("llama3-8b", use_env=False).model_copy(update={"vocab": 1024})
    two_nodes, pp2 = system_for_instance(CATALOG, "p5.48xlarge", 2), Layout(pp=2, dp=8, zero=1)
    job = TrainingJob(global_batch=64, seq_len=8192)
    ((kept, _),) = balance_last_stages(small_head, two_nodes, job, [(pp2, 1.0)], usable_bytes=usable, software=MEGATRON)
    assert kept == pp2


def test_the_search_balances_only_where_uneven_stages_are_allowed():
    assert uneven_allowed(None, MEGATRON) and not uneven_allowed(False, MEGATRON) and not uneven_allowed(None, None)
    system = system_for_instance(CATALOG, "p5.48xlarge", 2048)
    job = TrainingJob(global_batch=2048, seq_len=8192)
    chosen = choose_layout(LLAMA_405B, system, job, space=SearchSpace(pp=(16,)), software=MEGATRON)
    assert chosen.pp == 16 and chosen.last_stage_layers is not None
    even = SearchSpace(pp=(16,), uneven_stages=False)
    llama_70b = load_model("llama3-70b", use_env=False)  # 80 layers: 5 a stage at pp 16
    assert choose_layout(llama_70b, system, job, space=even, software=MEGATRON).last_stage_layers is None


@pytest.mark.parametrize(("model", "flag"), [("llama3.1-405b", None), ("llama3-70b", "--even-stages")])
def test_train_says_the_last_rank_it_chose(model, flag):
    from typer.testing import CliRunner

    from clustersim.cli.app import app

    args = ["train", model, "--instance", "p5.48xlarge", "--nodes", "2048", "--pp", "16", "--global-batch", "2048"]
    result = CliRunner().invoke(app, [*args, *([flag] if flag else []), "--json"])
    assert result.exit_code == 0, result.output
    layout = json.loads(result.stdout)["layout"]
    assert (layout["last_stage_layers"] is None) == (flag == "--even-stages")
