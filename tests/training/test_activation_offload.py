"""Activation offload to host memory (``Layout.offload_layers``) and FP8 GEMM inputs kept in a byte: the copies a
step makes over the host link, the memory they free, the layouts refused, and Megatron-Bridge's own recipes as the
check (its Llama 3 70B runs on GB200 and GB300 offload the fewest layers the memory model lets fit)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.cli.app import app
from clustersim.compute.memory import layer_activation_bytes, layers_to_offload, offloaded_required
from clustersim.compute.software import software_for
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, LayoutArrays, Recompute
from clustersim.plan.search import rank_layouts
from clustersim.plan.space import SearchSpace
from clustersim.system import HOST_COPY_FRACTION, system_for_accelerator
from clustersim.training.estimate import TrainingJob, estimate_training, evaluate_layouts
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
LLAMA_70B = load_model("llama3-70b", use_env=False)
MEGATRON = software_for("megatron", "blackwell")
SEQ = 8192


def _superchips(accelerator: str, devices: int = 64):
    return system_for_accelerator(CATALOG, accelerator, devices=devices, devices_per_node=4, network_bits_per_s=1.6e12)


def _estimate(system, layout: Layout, precision: Dtype = Dtype.FP8, global_batch: int = 256, software=MEGATRON):
    job = TrainingJob(global_batch=global_batch, seq_len=SEQ, precision=precision)
    return estimate_training(LLAMA_70B, system, layout, job, software=software)


def _term(estimate, name: str):
    return next(t for t in estimate.terms if t.name == name)


def test_the_host_links_come_from_the_catalog():
    """PCIe Gen5 x16 (63 GB/s each way) on H100/H200/B200, Gen4 on A100, NVLink-C2C's share of a GPU on GB200."""
    assert _superchips("gb200").host_bytes_per_s == pytest.approx(225e9)
    h100 = system_for_accelerator(CATALOG, "h100-sxm", devices=8, devices_per_node=8)
    assert h100.host_bytes_per_s == pytest.approx(63e9)
    a100 = system_for_accelerator(CATALOG, "a100-sxm4-80gb", devices=8, devices_per_node=8)
    assert a100.host_bytes_per_s == pytest.approx(31.5e9)
    assert system_for_accelerator(CATALOG, "trainium2", devices=16, devices_per_node=16).host_bytes_per_s is None


def test_each_offloaded_layer_copies_its_activations_out_and_back_behind_the_next_layers_compute():
    """Per micro-batch and offloaded layer: a copy of B bytes each way at what copies reach over the host link,
    exposed where it
    outlasts one layer's forward (going out) or backward (coming back)."""
    system = _superchips("gb200")
    layout = Layout(dp=64, zero=3, micro_batch=2, offload_layers=40)
    estimate = _estimate(system, layout)
    per_layer = float(
        layer_activation_bytes(LLAMA_70B, LayoutArrays.of([layout]), seq_len=SEQ, fused=True, float8_inputs=True)[0]
    )
    copy = per_layer / (225e9 * HOST_COPY_FRACTION)
    forward = sum(op.forward_s for op in estimate.operations if op.scope == "layer")
    backward = sum(op.backward_s for op in estimate.operations if op.scope == "layer")
    micro_batches = 256 // (64 * 2)
    term = _term(estimate, "activation offload")
    assert term.link_s == pytest.approx(micro_batches * 40 * 2 * copy, rel=1e-9)
    expected = micro_batches * 40 * (max(copy - forward, 0.0) + max(copy - backward, 0.0))
    assert term.exposed_s == pytest.approx(expected, rel=1e-9, abs=1e-12)
    # a link a tenth as fast: the copies outlast the forward layers they hide behind and show
    slow = estimate_training(
        LLAMA_70B,
        dataclasses.replace(system, host_bytes_per_s=22.5e9),
        layout,
        TrainingJob(global_batch=256, seq_len=SEQ, precision=Dtype.FP8),
        software=MEGATRON,
    )
    slow_copy = per_layer / (22.5e9 * HOST_COPY_FRACTION)
    assert slow_copy > forward
    slow_expected = micro_batches * 40 * (max(slow_copy - forward, 0.0) + max(slow_copy - backward, 0.0))
    assert _term(slow, "activation offload").exposed_s == pytest.approx(slow_expected, rel=1e-9)
    assert slow.step_s - estimate.step_s == pytest.approx(slow_expected - term.exposed_s, rel=1e-6)
    none = _estimate(system, layout.model_copy(update={"offload_layers": None}))
    assert _term(none, "activation offload").link_s == 0


def test_offloading_frees_the_layers_but_one_in_flight():
    system = _superchips("gb200")
    layout = Layout(dp=64, zero=3, micro_batch=2)
    per_layer = float(
        layer_activation_bytes(LLAMA_70B, LayoutArrays.of([layout]), seq_len=SEQ, fused=True, float8_inputs=True)[0]
    )
    kept = _estimate(system, layout).memory.activations_bytes
    for layers in (1, 10, 40, 79):
        offloaded = _estimate(system, layout.model_copy(update={"offload_layers": layers})).memory.activations_bytes
        assert kept - offloaded == pytest.approx((layers - 1) * per_layer, rel=1e-9)


def test_fp8_gemm_inputs_take_a_byte_where_the_framework_keeps_them_quantized():
    """Transformer Engine keeps the QKV, projection and both MLP GEMM inputs in FP8 for the weight gradients: per
    token and layer, 2h + q + f bytes fewer (Llama 3 70B: 2 x 8192 + 8192 + 28672); torchtitan keeps 16-bit ones."""
    layout = Layout(dp=64, zero=3, micro_batch=2)
    system = _superchips("gb200")
    bf16 = _estimate(system, layout, Dtype.BF16).memory.activations_bytes
    fp8 = _estimate(system, layout, Dtype.FP8).memory.activations_bytes
    tokens = 2 * SEQ
    assert bf16 - fp8 == pytest.approx(80 * tokens * (2 * 8192 + 8192 + 28672), rel=1e-9)
    titan = software_for("torchtitan", "blackwell")
    assert not titan.float8_saved_inputs
    titan_bf16 = _estimate(system, layout, Dtype.BF16, software=titan).memory.activations_bytes
    assert _estimate(system, layout, Dtype.FP8, software=titan).memory.activations_bytes == titan_bf16


@pytest.mark.parametrize(
    ("accelerator", "micro_batch", "precision", "recipe_layers"),
    [
        ("gb200", 2, Dtype.FP8, 40),  # LLAMA3_70B_PRETRAIN_CONFIG_GB200_FP8_CS_V2
        ("gb300", 2, Dtype.FP8, 20),  # LLAMA3_70B_PRETRAIN_CONFIG_GB300_FP8_CS_V2
        ("gb300", 2, Dtype.BF16, 30),  # LLAMA3_70B_PRETRAIN_CONFIG_GB300_BF16_V2
        ("gb200", 1, Dtype.BF16, 20),  # LLAMA3_70B_PRETRAIN_CONFIG_GB200_BF16_V2
    ],
)
def test_megatron_bridge_offloads_the_fewest_layers_that_fit_to_the_nearest_ten(
    accelerator, micro_batch, precision, recipe_layers
):
    """NVIDIA-NeMo/Megatron-Bridge @v0.4.2 scripts/performance/configs/llama/llama3_workload_base_configs.py: Llama 3
    70B on 64 GPUs, Megatron FSDP, global batch 256, sequence 8192, cpu_offloading_num_layers 40 / 20 / 30 / 20. The
    memory model finds the fewest offloaded layers that fit in (recipe - 10, recipe]: the recipes' round numbers, and
    a layout that runs out of memory with ten fewer. Without FP8 inputs kept in a byte the FP8 recipes would not fit."""
    system = _superchips(accelerator)

    def fits(layers: int | None) -> bool:
        layout = Layout(dp=64, zero=3, micro_batch=micro_batch, offload_layers=layers)
        return _estimate(system, layout, precision).fits

    fewest = next(layers for layers in range(1, 80) if fits(layers))
    assert not fits(None)
    assert recipe_layers - 10 < fewest <= recipe_layers
    if precision is Dtype.FP8:
        unquantized = MEGATRON.model_copy(update={"float8_saved_inputs": False})
        layout = Layout(dp=64, zero=3, micro_batch=micro_batch, offload_layers=recipe_layers)
        assert not _estimate(system, layout, precision, software=unquantized).fits


@pytest.mark.parametrize(
    ("model", "accelerator", "devices", "tp", "micro_batch", "global_batch", "precision", "recipe_layers"),
    [
        ("llama3.1-405b", "gb300", 128, 2, 1, 64, Dtype.FP8, 10),  # LLAMA31_405B_PRETRAIN_CONFIG_GB300_FP8_CS_V1
        ("llama3.1-405b", "gb300", 128, 2, 1, 64, Dtype.BF16, 40),  # LLAMA31_405B_PRETRAIN_CONFIG_GB300_BF16_V1
        ("llama3.1-405b", "gb200", 128, 2, 1, 64, Dtype.FP8, 92),  # LLAMA31_405B_PRETRAIN_CONFIG_GB200_FP8_CS_V1
        ("llama3-70b", "b200", 64, 1, 1, 256, Dtype.FP8, 5),  # LLAMA3_70B_PRETRAIN_CONFIG_B200_FP8_CS_V2
    ],
)
def test_the_other_offloading_recipes_fit_the_memory_model(
    model, accelerator, devices, tp, micro_batch, global_batch, precision, recipe_layers
):
    """The same release's other Megatron FSDP recipes that offload (llama31_workload_base_configs.py and
    llama3_workload_base_configs.py @v0.4.2): at the recipe's count each fits the device within 1% (405B on GB300 at
    FP8 needs 11 layers by the model, the recipe offloads 10; the others offload more than it needs)."""
    zoo = load_model(model, use_env=False)
    system = system_for_accelerator(
        CATALOG, accelerator, devices=devices, devices_per_node=8 if accelerator == "b200" else 4,
        network_bits_per_s=3.2e12,
    )  # fmt: skip
    layout = Layout(tp=tp, dp=devices // tp, zero=3, micro_batch=micro_batch, sequence_parallel=tp > 1)
    job = TrainingJob(global_batch=global_batch, seq_len=SEQ, precision=precision)
    offloaded = estimate_training(zoo, system, layout.model_copy(update={"offload_layers": recipe_layers}), job)
    assert offloaded.memory.required_bytes <= 1.01 * offloaded.capacity_bytes
    kept = estimate_training(zoo, system, layout, job)
    assert kept.memory.activations_bytes > offloaded.memory.activations_bytes


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        (Layout(dp=32, pp=2, offload_layers=8), "needs pp 1 and recompute none"),
        (Layout(dp=64, recompute=Recompute.SELECTIVE, offload_layers=8), "needs pp 1 and recompute none"),
        (Layout(dp=64, offload_layers=80), "fewer layers than the model's 80"),
    ],
)
def test_megatron_cores_own_limits_are_refused(layout, message):
    with pytest.raises(ClusterSimError, match=message) as error:
        _estimate(_superchips("gb200"), layout, global_batch=128)
    assert error.value.field == "offload_layers"


def test_a_framework_that_does_not_offload_or_a_device_without_a_host_link_is_refused():
    layout = Layout(dp=64, offload_layers=8)
    with pytest.raises(ClusterSimError, match="torchtitan does not offload activations") as error:
        _estimate(_superchips("gb200"), layout, software=software_for("torchtitan", "blackwell"))
    assert error.value.field == "offload_layers"
    b300 = system_for_accelerator(CATALOG, "b300", devices=64, devices_per_node=8)
    with pytest.raises(ClusterSimError, match="no link to host memory for b300"):
        _estimate(b300, layout, software=software_for("megatron", "blackwell"))


def test_the_command_line_offloads_a_given_layout_and_refuses_it_in_a_search():
    runner = CliRunner()
    base = ["train", "llama3-70b", "--instance", "p6e-gb200.36xlarge", "--nodes", "16", "--seq", "8192"]
    given = [*base, "--tp", "1", "--pp", "1", "--zero", "3", "--micro-batch", "2", "--recompute", "none"]
    result = runner.invoke(
        app, [*given, "--global-batch", "256", "--precision", "fp8", "--offload-layers", "40", "--json"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["layout"]["offload_layers"] == 40
    terms = {t["name"]: t for t in out["terms"]}
    assert terms["activation offload"]["link_s"] > 0
    assert out["fits"]
    refused = runner.invoke(app, [*base, "--offload-layers", "40"])
    assert refused.exit_code != 0
    assert "--offload-layers 40 offloads a given layout's activations; a search offloads the fewest" in refused.output
    pipelined = runner.invoke(app, [*base, "--tp", "1", "--pp", "2", "--recompute", "none", "--offload-layers", "4"])
    assert pipelined.exit_code != 0
    assert "needs pp 1 and recompute none" in pipelined.output


def test_a_layout_that_does_not_fit_is_told_to_offload_where_it_could():
    runner = CliRunner()
    given = ["train", "llama3-70b", "--instance", "p6e-gb200.36xlarge", "--nodes", "16", "--seq", "8192"]
    given += ["--tp", "1", "--pp", "1", "--zero", "3", "--micro-batch", "2", "--recompute", "none"]
    given += ["--global-batch", "256", "--precision", "fp8"]
    kept = runner.invoke(app, given)
    assert kept.exit_code != 0
    assert "does not fit" in kept.output and "full recompute, offloaded layers (--offload-layers), a" in kept.output
    short = runner.invoke(app, [*given, "--offload-layers", "30"])
    assert "more offloaded layers (--offload-layers)" in short.output
    recomputed = runner.invoke(
        app, [*given[:-6], "--recompute", "selective", "--global-batch", "256", "--precision", "fp8"]
    )
    assert "does not fit" in recomputed.output and "--offload-layers" not in recomputed.output


def test_explain_ranks_the_exposed_offload_copies_as_a_lever():
    """On PCIe (H100) 24 offloaded layers of Llama 3 8B at 2 x 8,192 tokens outlast the layers they hide behind: the
    exposed copies are a term explain can move, with what to check."""
    args = ["explain", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--tp", "1", "--pp", "1"]
    args += ["--zero", "3", "--micro-batch", "2", "--global-batch", "64", "--seq", "8192", "--recompute", "none"]
    result = CliRunner().invoke(app, [*args, "--offload-layers", "24", "--measured-step", "20", "--json"])
    assert result.exit_code == 0, result.output
    candidates = {c["term"]: c for c in json.loads(result.stdout)["candidates"]}
    offload = candidates["activation offload"]
    assert offload["seconds"] > 1.0 and offload["kind"] == "time"
    assert "host link's copy rate" in offload["hint"] and "--cpu-offloading-num-layers" in offload["hint"]


def test_the_search_offloads_the_fewest_layers_a_layout_needs_to_fit():
    """Held to Megatron-Bridge's own degrees (tp 1, FSDP, micro-batch 2) and no headroom, the search on 64 GB200
    returns the recipe itself, 40 layers offloaded; the memory it reports for a count is the estimate's."""
    runner = CliRunner()
    args = ["train", "llama3-70b", "--instance", "p6e-gb200.36xlarge", "--nodes", "16", "--seq", "8192"]
    args += ["--global-batch", "256", "--precision", "fp8", "--tp", "1", "--zero", "3", "--micro-batch", "2"]
    result = runner.invoke(app, [*args, "--headroom", "0", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["layout_chosen"] and out["layout"]["offload_layers"] == 40 and out["layout"]["pp"] == 1
    system = _superchips("gb200")
    layout = Layout(dp=64, zero=3, micro_batch=2)
    kept = _estimate(system, layout).memory.required_bytes
    per_layer = layer_activation_bytes(
        LLAMA_70B, LayoutArrays.of([layout]), seq_len=SEQ, fused=True, float8_inputs=True
    )
    for layers in (1, 20, 40):
        offloaded = _estimate(system, layout.model_copy(update={"offload_layers": layers})).memory.required_bytes
        predicted = offloaded_required(np.array([kept]), per_layer, np.array([float(layers)]))
        assert offloaded == pytest.approx(float(predicted[0]), rel=1e-12)
    usable = system.memory_bytes
    assert layers_to_offload(np.array([kept]), per_layer, usable, 80)[0] == 40
    assert layers_to_offload(np.array([kept]), per_layer, kept, 80)[0] == 0  # fits already
    assert (
        layers_to_offload(np.array([kept]), per_layer, kept / 100, 80)[0] == -1
    )  # below the model state: no count fits


def test_a_search_never_offloads_where_the_framework_does_not():
    runner = CliRunner()
    args = ["train", "llama3-70b", "--instance", "p6e-gb200.36xlarge", "--nodes", "16", "--seq", "8192"]
    args += ["--global-batch", "256", "--precision", "fp8", "--tp", "1", "--micro-batch", "2", "--headroom", "0"]
    result = runner.invoke(app, [*args, "--framework", "torchtitan", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["layout"]["offload_layers"] is None


def test_a_ranking_with_offloaded_candidates_prices_them_as_the_estimator_does():
    """Every candidate carries the layers it offloads: its memory and step are those of the estimator on that layout
    (the offloaded ones priced with their copies); a PCIe host's search offloads none (its link carries the NICs'
    GPUDirect traffic, which the offload term does not price)."""
    system = _superchips("gb200")
    job = TrainingJob(global_batch=256, seq_len=SEQ, precision=Dtype.FP8)
    space = SearchSpace(tp=(1, 2), micro_batch=(1, 2), headroom=0.0)
    ranking = rank_layouts(LLAMA_70B, system, job, space=space, software=MEGATRON)
    offloaded = ranking.layouts.offload_layers
    assert (offloaded > 0).any() and (offloaded == 0).any()
    terms, memory = evaluate_layouts(LLAMA_70B, system, ranking.layouts, job, software=MEGATRON)
    np.testing.assert_allclose(ranking.required_bytes, memory.required, rtol=1e-12, atol=0)
    np.testing.assert_allclose(ranking.step_s, terms.step_s, rtol=1e-12, atol=0)
    assert ranking.fits[offloaded > 0].all()
    h100 = system_for_accelerator(CATALOG, "h100-sxm", devices=64, devices_per_node=8, network_bits_per_s=3.2e12)
    hopper = rank_layouts(LLAMA_70B, h100, job, space=space, software=software_for("megatron", "hopper"))
    assert (hopper.layouts.offload_layers == 0).all()
