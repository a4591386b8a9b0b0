"""A quantized job's recipe running groups of operations in a wider format (Megatron-Core's per-module quant_recipe,
Megatron-Bridge's Nemotron 3 Super te_quant.cfg): each group's share of the mean layer's operations at that format's
time, the MTP blocks whole, refused where a job or a model cannot have them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.cli.app import app
from clustersim.cli.job_options import operation_formats as parse_formats
from clustersim.compute.operation_formats import (
    GROUPS,
    check_operation_formats,
    groups_of,
    mtp_layer_share,
    operation_shares,
)
from clustersim.compute.software import SoftwareProfile, software_for
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, Recompute
from clustersim.system import system_for_accelerator
from clustersim.training.estimate import Estimate, TrainingJob, estimate_training
from clustersim.validation.cases import project_dir
from clustersim.validation.training import estimate_case
from clustersim.workload.float8 import Float8Recipe
from clustersim.workload.ops import layer_operations
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
LLAMA_8B = load_model("llama3-8b", use_env=False)
SUPER = load_model("nemotron-3-super", use_env=False)
QWEN_NEXT = load_model("qwen3-next-80b-a3b", use_env=False)
MEGATRON = software_for("megatron", "blackwell")
B200 = system_for_accelerator(CATALOG, "b200", devices=8, devices_per_node=8, network_bits_per_s=400e9)
H100 = CATALOG.accelerator("h100-sxm")
LAYOUT = Layout(tp=1, pp=1, dp=8, micro_batch=1, zero=1, recompute=Recompute.NONE, sequence_parallel=False)
SUPER_LAYOUT = Layout(tp=1, pp=1, dp=8, ep=8, micro_batch=1, zero=1, recompute=Recompute.NONE)
RECIPE = {"attention_projections": "bf16", "latent_projections": "bf16", "mixer_output_projection": "mxfp8"}


def _estimate(model, precision: Dtype, formats=None, software: SoftwareProfile = MEGATRON, **more) -> Estimate:  # type: ignore[no-untyped-def]
    job = TrainingJob(global_batch=64, seq_len=4096, precision=precision)
    layout = SUPER_LAYOUT if model.moe else LAYOUT
    sw = software.model_copy(update={"operation_formats": dict(formats or {}), **more})
    return estimate_training(model, B200, layout, job, software=sw)


def _ops(estimate: Estimate) -> dict[str, tuple[float, float]]:
    return {o.name: (o.forward_s, o.backward_s) for o in estimate.operations if o.scope == "layer"}


def test_a_dense_models_attention_projections_in_bf16_run_at_the_bf16_jobs_time_and_the_rest_at_the_jobs():
    fp8, bf16 = _ops(_estimate(LLAMA_8B, Dtype.FP8)), _ops(_estimate(LLAMA_8B, Dtype.BF16))
    mixed = _ops(_estimate(LLAMA_8B, Dtype.FP8, {"attention_projections": "bf16"}))
    for name in ("qkv", "output projection"):  # every layer is an attention layer: the whole operation
        assert mixed[name] == pytest.approx(bf16[name], rel=1e-12)
        assert mixed[name][0] > 1.3 * fp8[name][0]
    assert mixed["mlp"] == pytest.approx(fp8["mlp"], rel=1e-12)
    assert mixed["attention core"] == pytest.approx(fp8["attention core"], rel=1e-12)


def test_a_hybrid_splits_its_mixers_projections_by_their_weights():
    # Super's mean layer: 8 of 48 mixers are attention, 40 Mamba-2; the qkv and output projection GEMMs are their sum
    shares = operation_shares(SUPER, {"attention_projections": Dtype.BF16, "mixer_output_projection": Dtype.FP8})
    attention = SUPER.full_attention_layers / SUPER.layers
    assert shares["qkv"] == {
        Dtype.BF16: pytest.approx(attention * SUPER.qkv_matmul_params() / SUPER.mixer_qkv_matmul_params())
    }
    out = shares["output projection"]
    assert out[Dtype.BF16] + out[Dtype.FP8] == pytest.approx(1.0)  # attention's and Mamba's output projections
    assert 0 < out[Dtype.BF16] < attention  # an attention projection (4096 x 4096) is narrower than Mamba's (8192 in)
    assert operation_shares(SUPER, {"latent_projections": Dtype.BF16}) == {"latent projections": {Dtype.BF16: 1.0}}
    assert operation_shares(SUPER, {}) == {}


def test_the_blend_puts_each_share_at_its_formats_time():
    low, high, mid = (_ops(_estimate(SUPER, d)) for d in (Dtype.FP4, Dtype.BF16, Dtype.FP8))
    mixed = _ops(_estimate(SUPER, Dtype.FP4, RECIPE))
    formats = check_operation_formats(SUPER, RECIPE, Dtype.FP4, B200.accelerator)
    shares = operation_shares(SUPER, formats)
    for name, op in shares.items():
        rest = 1.0 - sum(op.values())
        times = {Dtype.BF16: high, Dtype.FP8: mid}
        expected = rest * low[name][0] + sum(s * times[d][name][0] for d, s in op.items())
        assert mixed[name][0] == pytest.approx(expected, rel=1e-9)
    assert mixed["experts"] == pytest.approx(low["experts"], rel=1e-12)  # the routed experts stay in NVFP4


def test_bf16_layers_and_the_mtp_blocks_take_their_shares_of_the_priced_layers():
    model = SUPER.model_copy(update={"mtp_layers": 2})
    low, high = (_ops(_estimate(model, d)) for d in (Dtype.FP4, Dtype.BF16))
    mtp = mtp_layer_share(model)
    assert mtp == pytest.approx(2 / 50)
    both = _ops(_estimate(model, Dtype.FP4, {"mtp": "bf16"}, bf16_layers=14))
    bf16 = (1 - mtp) * 14 / 88  # of the decoder's layers, as Megatron counts them
    for name in ("experts", "scan", "router"):
        expected = (1 - bf16 - mtp) * low[name][0] + (bf16 + mtp) * high[name][0]
        assert both[name][0] == pytest.approx(expected, rel=1e-9)
    with pytest.raises(ClusterSimError, match=r"nemotron-3-super-120b-a12b has no mtp"):
        _estimate(SUPER, Dtype.FP4, {"mtp": "bf16"})  # the zoo's Super predicts no tokens ahead


def test_casts_shrink_with_the_gemms_that_leave_the_jobs_format():
    rowwise = MEGATRON.model_copy(update={"float8_recipe": Float8Recipe.ROWWISE})
    base = _ops(_estimate(LLAMA_8B, Dtype.FP8, software=rowwise))
    mixed = _ops(_estimate(LLAMA_8B, Dtype.FP8, {"attention_projections": "bf16"}, software=rowwise))
    ops = layer_operations(LLAMA_8B, tokens=4096.0, seq_len=4096, tp=1.0, sp_split=1.0, ep=1.0, fused_attention=True)
    flop = {o.name: o.flop for o in ops}
    kept = flop["mlp"] / (flop["qkv"] + flop["output projection"] + flop["mlp"])
    assert mixed["float8 casts"][0] == pytest.approx(kept * base["float8 casts"][0], rel=1e-9)
    assert mixed["float8 scaled GEMMs"][0] == pytest.approx(kept * base["float8 scaled GEMMs"][0], rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(sorted(GROUPS)), st.sampled_from(["bf16", "fp16", "mxfp8"]))
def test_a_wider_group_moves_only_its_own_operations_toward_the_wider_formats_time(group, fmt):
    model = (QWEN_NEXT if group != "latent_projections" else SUPER).model_copy(update={"mtp_layers": 1})
    wide = {"bf16": Dtype.BF16, "fp16": Dtype.FP16, "mxfp8": Dtype.FP8}[fmt]
    low, high = _ops(_estimate(model, Dtype.FP4)), _ops(_estimate(model, wide))
    mixed = _ops(_estimate(model, Dtype.FP4, {group: fmt}))
    moved = set(high) if group == "mtp" else set(operation_shares(model, {group: wide}))
    assert moved
    for name, (forward, backward) in mixed.items():
        if name not in moved:
            assert (forward, backward) == pytest.approx(low[name], rel=1e-12)
            continue
        for k, value in enumerate((forward, backward)):  # between the two formats' times (equal where no GEMM)
            assert (
                min(low[name][k], high[name][k]) * (1 - 1e-12)
                <= value
                <= max(low[name][k], high[name][k]) * (1 + 1e-12)
            )


def test_what_a_job_or_a_model_cannot_have_is_refused_in_one_line():
    def refused(text: str, formats: dict[str, str], precision: Dtype = Dtype.FP8, model=LLAMA_8B, chip=H100) -> None:  # type: ignore[no-untyped-def]
        with pytest.raises(ClusterSimError) as err:
            check_operation_formats(model, formats, precision, chip)
        assert str(err.value).startswith(text), str(err.value)
        assert "\n" not in str(err.value) and str(err.value.field).startswith("operation_formats")

    every = "attention_projections, mixer_output_projection, latent_projections, mtp"
    refused(
        "operation_formats: a bf16 job runs every GEMM in 16 bits; operation formats need an fp8 or fp4 job",
        {"attention_projections": "bf16"},
        Dtype.BF16,
    )
    refused(
        f"operation_formats: unknown group 'attention' (groups: {every}; llama3-8b's: attention_projections)",
        {"attention": "bf16"},
    )
    refused(
        f"operation_formats: nemotron-3-super-120b-a12b has no mtp (groups: {every}; nemotron-3-super-120b-a12b's: "
        "attention_projections, mixer_output_projection, latent_projections)",
        {"mtp": "bf16"},
        Dtype.FP4,
        SUPER,
        B200.accelerator,
    )
    refused(
        "operation_formats attention_projections=fp8: not wider than the fp8 job's own format (valid: bf16, fp16)",
        {"attention_projections": "fp8"},
    )
    refused(
        "operation_formats attention_projections: mxfp8 GEMMs need tensor cores that h100-sxm",
        {"attention_projections": "mxfp8"},
    )
    refused(
        "operation_formats attention_projections: 'fp4' is ambiguous",
        {"attention_projections": "fp4"},
        Dtype.FP4,
        chip=B200.accelerator,
    )
    with pytest.raises(ClusterSimError) as err:
        check_operation_formats(LLAMA_8B, {"latent_projections": "bf16"}, Dtype.FP8, H100, field="software.x")
    assert str(err.value).startswith("software.x: llama3-8b has no latent_projections") and err.value.value == (
        "latent_projections"
    )
    with pytest.raises(ClusterSimError) as err:
        check_operation_formats(LLAMA_8B, {"attention_projections": "fp8"}, Dtype.FP8, H100)
    assert err.value.value == "fp8"
    with pytest.raises(ClusterSimError) as err:
        check_operation_formats(LLAMA_8B, {"attention_projections": "bf16"}, Dtype.BF16, H100)
    assert err.value.value == {"attention_projections": "bf16"}
    assert check_operation_formats(LLAMA_8B, {}, Dtype.BF16, H100) == {}
    assert check_operation_formats(SUPER, RECIPE, Dtype.FP4, B200.accelerator) == {
        "attention_projections": Dtype.BF16, "latent_projections": Dtype.BF16, "mixer_output_projection": Dtype.FP8,
    }  # fmt: skip


def test_a_group_is_offered_where_the_model_has_its_layers():
    linear = QWEN_NEXT.linear_attention
    assert linear is not None
    recurrent_only = QWEN_NEXT.model_copy(update={"linear_attention": linear.model_copy(update={"layers": 48})})
    one_attention = QWEN_NEXT.model_copy(update={"linear_attention": linear.model_copy(update={"layers": 47})})
    assert recurrent_only.full_attention_layers == 0 and one_attention.full_attention_layers == 1
    assert groups_of(recurrent_only) == ("mixer_output_projection",)
    assert groups_of(one_attention) == ("attention_projections", "mixer_output_projection")
    assert groups_of(LLAMA_8B) == ("attention_projections",)
    assert groups_of(SUPER.model_copy(update={"mtp_layers": 2})) == tuple(GROUPS)


def test_both_projections_in_one_format_take_the_whole_output_projection():
    shares = operation_shares(SUPER, {"attention_projections": Dtype.BF16, "mixer_output_projection": Dtype.BF16})
    assert shares["output projection"] == {Dtype.BF16: pytest.approx(1.0)}


def _super_case(case_id: str) -> dict:
    with (project_dir() / "training.jsonl").open() as lines:
        return next(c for c in map(json.loads, lines) if c["id"] == case_id)


def test_the_super_nvfp4_rows_state_the_recipes_formats_and_are_slower_for_them():
    with (project_dir() / "training.jsonl").open() as lines:
        rows = [c for c in map(json.loads, lines) if "nemotron-3-super" in c["id"] and c["precision"] == "nvfp4"]
    assert len(rows) == 15
    for row in rows:  # te_quant.cfg, blob 646ff9e6, in every release from v0.4.0 to v0.6.0
        assert row["software"]["operation_formats"] == {**RECIPE, "mtp": "bf16"}
        assert "646ff9e6" in row["notes"] and "*mixer.out_proj" in row["notes"]
    case = _super_case("mbridge2608_nemotron-3-super-120b-a12b_gb300_64gpu_mbs1_ep64_nvfp4")
    without = dict(case, software={k: v for k, v in case["software"].items() if k != "operation_formats"})
    stated, none = estimate_case(case, CATALOG).step_s, estimate_case(without, CATALOG).step_s
    assert 1.02 < stated / none < 1.08  # about 4% more step on a GB300 (EP64)
    bf16 = dict(case, precision="bf16", software=dict(case["software"], bf16_layers=None))
    with pytest.raises(ClusterSimError, match=r"case mbridge2608.*software.operation_formats: a bf16 job runs every"):
        estimate_case(bf16, CATALOG)


def test_train_honours_the_flag_and_refuses_a_malformed_or_repeated_group():
    runner = CliRunner()
    args = ["train", "llama3-8b", "--instance", "p6-b200.48xlarge", "--nodes", "1", "--tp", "1", "--pp", "1"]
    args += ["--global-batch", "64", "--seq", "4096", "--precision", "nvfp4", "--json"]
    steps = {}
    for extra in ([], ["--operation-format", "attention_projections=bf16"]):
        result = runner.invoke(app, [*args, *extra])
        assert result.exit_code == 0, result.output
        steps[len(extra)] = json.loads(result.stdout)["step_s"]
    assert steps[2] > steps[0]
    bad = runner.invoke(app, [*args, "--operation-format", "attention_projections"])
    assert bad.exit_code != 0 and "--operation-format 'attention_projections': give GROUP=FORMAT" in bad.output
    twice = ["--operation-format", "attention_projections=bf16", "--operation-format", "attention_projections=fp8"]
    again = runner.invoke(app, [*args, *twice])
    assert again.exit_code != 0 and "group 'attention_projections' given twice (bf16, fp8)" in again.output
    assert parse_formats([" mtp = bf16 "]) == {"mtp": "bf16"} and parse_formats(None) == {}
