"""Layers an 8- or 4-bit job keeps in BF16 (Megatron's first_last_layers_bf16): that share of every layer's GEMMs at
their BF16 time, counted in the framework's layers, refused where a job cannot have them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.cli.app import app
from clustersim.compute.bf16_layers import bf16_layer_share, check_bf16_layers, framework_layers
from clustersim.compute.software import SoftwareProfile, software_for
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, Recompute
from clustersim.system import system_for_accelerator
from clustersim.training.estimate import Estimate, TrainingJob, estimate_training
from clustersim.validation.cases import project_dir
from clustersim.validation.training import estimate_case
from clustersim.workload.float8 import Float8Recipe
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
LLAMA_8B = load_model("llama3-8b", use_env=False)
SUPER = load_model("nemotron-3-super", use_env=False)
NANO = load_model("nemotron-3-nano", use_env=False)
MEGATRON = software_for("megatron", "blackwell")
B200 = system_for_accelerator(CATALOG, "b200", devices=8, devices_per_node=8, network_bits_per_s=400e9)
LAYOUT = Layout(tp=1, pp=1, dp=8, micro_batch=1, zero=1, recompute=Recompute.NONE, sequence_parallel=False)
COMPUTE = ("forward", "backward")


ROWWISE = MEGATRON.model_copy(update={"float8_recipe": Float8Recipe.ROWWISE})  # FP8 layers run casts of their own


def _estimate(precision: Dtype, bf16_layers: int = 0, software: SoftwareProfile = MEGATRON) -> Estimate:
    job = TrainingJob(global_batch=64, seq_len=4096, precision=precision)
    return estimate_training(
        LLAMA_8B, B200, LAYOUT, job, software=software.model_copy(update={"bf16_layers": bf16_layers})
    )


def _compute_s(precision: Dtype, bf16_layers: int = 0, software: SoftwareProfile = MEGATRON) -> dict[str, float]:
    estimate = _estimate(precision, bf16_layers, software)
    return {t.name: float(t.link_s) for t in estimate.terms if t.name in COMPUTE}


def test_megatron_counts_a_hybrid_stacks_mixers_and_mlp_blocks_each_as_a_layer():
    # Super's hybrid_layer_pattern: 88 symbols, 40 Mamba-2, 8 attention, 40 MoE; Nano's 52: 23, 6, 23
    assert framework_layers(SUPER) == 88
    assert framework_layers(NANO) == 52
    assert framework_layers(LLAMA_8B) == LLAMA_8B.layers == 32
    assert bf16_layer_share(SUPER, 14) == pytest.approx(14 / 88)


def test_no_bf16_layers_change_nothing_and_all_of_them_price_the_layers_as_a_bf16_job():
    fp4, bf16 = _compute_s(Dtype.FP4), _compute_s(Dtype.BF16)
    assert _compute_s(Dtype.FP4, 0) == fp4
    every = _compute_s(Dtype.FP4, 32)
    # the output head is BF16 in both; the layers' GEMMs, their casts gone, as a BF16 job's
    assert every == pytest.approx(bf16, rel=1e-9)
    assert fp4["forward"] < 0.8 * bf16["forward"]  # FP4 pays here, so the share matters
    assert _compute_s(Dtype.FP8, 32, ROWWISE) == pytest.approx(bf16, rel=1e-9)  # the recipe's casts gone too
    # each operation keeps its name, kind and scope
    shape = [(op.name, op.kind, op.scope) for op in _estimate(Dtype.FP4).operations]
    assert [(op.name, op.kind, op.scope) for op in _estimate(Dtype.FP4, 14).operations] == shape


@settings(max_examples=25, deadline=None)
@given(
    st.integers(min_value=0, max_value=31),
    st.sampled_from([(Dtype.FP8, MEGATRON), (Dtype.FP4, MEGATRON), (Dtype.FP8, ROWWISE)]),
)
def test_each_more_bf16_layer_adds_the_same_time_between_the_quantized_and_the_bf16_job(
    n: int, job: tuple[Dtype, SoftwareProfile]
):
    # the mean layer is linear in the share: n layers of 32 move the compute n / 32 of the way to BF16, the rowwise
    # recipe's casts (which only its FP8 layers run) included; each layer one 32nd (rowwise FP8 is the slower here)
    precision, software = job
    low, high = _compute_s(precision, 0, software), _compute_s(precision, 32, software)
    now, more = _compute_s(precision, n, software), _compute_s(precision, n + 1, software)
    for term in COMPUTE:
        assert now[term] == pytest.approx(low[term] + n / 32 * (high[term] - low[term]), rel=1e-9)
        assert more[term] - now[term] == pytest.approx((high[term] - low[term]) / 32, rel=1e-6)


def test_refused_in_a_16_bit_job_and_beyond_the_models_layers():
    for n, precision in ((88, Dtype.FP4), (0, Dtype.FP8), (0, Dtype.BF16)):
        check_bf16_layers(SUPER, n, precision)  # every layer, or none (in any job)
    refusals = (
        (SUPER, 89, Dtype.FP4, "x 89: nemotron-3-super-120b-a12b has 88 layers as its framework counts them (0 to 88)"),
        (LLAMA_8B, 2, Dtype.BF16, "x 2: a bf16 job runs every layer in 16 bits; BF16 layers need an fp8 or fp4 job"),
        (LLAMA_8B, -1, Dtype.FP8, "x must be 0 or more, got -1"),
    )
    for model, n, precision, message in refusals:
        with pytest.raises(ClusterSimError) as refused:
            check_bf16_layers(model, n, precision, field="x")
        assert str(refused.value) == message and (refused.value.field, refused.value.value) == ("x", n)


def _super_case(case_id: str) -> dict:
    with (project_dir() / "training.jsonl").open() as lines:
        return next(c for c in map(json.loads, lines) if c["id"] == case_id)


def test_the_super_nvfp4_rows_state_the_recipes_14_bf16_layers_and_are_slower_for_them():
    case = _super_case("mbridge2608_nemotron-3-super-120b-a12b_gb300_64gpu_mbs1_ep64_nvfp4")
    assert case["software"]["bf16_layers"] == 14
    without = dict(case, software=dict(case["software"], bf16_layers=0))
    stated, none = estimate_case(case, CATALOG).step_s, estimate_case(without, CATALOG).step_s
    # 14 of 88 layers' GEMMs in BF16: about 4% more step on a GB300 (EP64, 8 local experts)
    assert 1.02 < stated / none < 1.08


def test_a_case_stating_bf16_layers_in_a_bf16_run_is_refused():
    case = _super_case("mbridge2608_nemotron-3-super-120b-a12b_gb300_64gpu_mbs1_ep64_nvfp4")
    case = dict(case, precision="bf16")
    with pytest.raises(ClusterSimError, match=r"software.bf16_layers 14: a bf16 job runs every layer in 16 bits"):
        estimate_case(case, CATALOG)


def test_train_honours_the_flag_and_refuses_it_where_it_cannot_apply():
    runner = CliRunner()
    args = ["train", "llama3-8b", "--instance", "p6-b200.48xlarge", "--nodes", "1", "--tp", "1", "--pp", "1"]
    args += ["--global-batch", "64", "--seq", "4096", "--json"]
    steps = {}
    for n in (0, 16):
        result = runner.invoke(app, [*args, "--precision", "nvfp4", "--bf16-layers", str(n)])
        assert result.exit_code == 0, result.output
        steps[n] = json.loads(result.stdout)["step_s"]
    assert steps[16] > steps[0]
    bf16 = runner.invoke(app, [*args, "--bf16-layers", "4"])
    assert bf16.exit_code != 0
    assert "--bf16-layers 4: a bf16 job runs every layer in 16 bits" in bf16.output
    beyond = runner.invoke(app, [*args, "--precision", "fp8", "--bf16-layers", "33"])
    assert beyond.exit_code != 0
    assert "bf16_layers 33: llama3-8b has 32 layers as its framework counts them (0 to 32)" in beyond.output


def test_a_profiles_count_beyond_the_models_layers_is_refused_where_it_prices_a_low_precision_job():
    # a user's framework profile may set bf16_layers for every job: a 16-bit job ignores it, an 8-bit job on a model
    # with fewer layers is refused rather than priced with more BF16 layers than it has
    assert _compute_s(Dtype.BF16, 40) == _compute_s(Dtype.BF16)
    with pytest.raises(ClusterSimError, match=r"bf16_layers 40: llama3-8b has 32 layers as its framework counts them"):
        _compute_s(Dtype.FP8, 40)
