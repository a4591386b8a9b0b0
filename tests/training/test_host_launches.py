"""Host-bound MoE steps (``clustersim.training.host_launches``): a run with no CUDA graphs waits for its host.

The physics: per micro-batch on the slowest rank, the MoE layers' host time less what the GPU does meanwhile, where
positive; nothing for a dense model, a run with graphs (or none stated), or a host the profile has no time for. The
constant: the scan the software profile's note records, on two sources of DeepSeek-V3 on GB200 without graphs, and
Llama 4 Maverick's six graph-less GB200 runs as an out-of-sample check. The x86 host: explain says the wait is not
priced there.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.choices import CudaGraphs
from clustersim.compute.software import software_for, software_profiles
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout
from clustersim.system import system_for_instance
from clustersim.training.estimate import estimate_training
from clustersim.training.host_launches import DEEPSEEK_V3_LAYER_LAUNCHES, graphs_note, host_time_scale
from clustersim.training.job import TrainingJob
from clustersim.validation.cases import primary_field, project_dir, read_cases
from clustersim.validation.training import case_estimator, case_value
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
CASES = {c.id: c for c in read_cases(project_dir() / "training.jsonl")}
DGXC = [c for i, c in CASES.items() if i.startswith("dgxc_deepseek-v3_gb200")]
BASELINE = [c for i, c in CASES.items() if i.startswith("mlm_deepseek-v3") and "baseline" in i]
MAVERICK = [c for i, c in CASES.items() if i.startswith("dgxc_llama4-maverick_gb200")]
GPT_OSS_EAGER = [c for i, c in CASES.items() if "gpt-oss-120b_gb200" in i and c.software.cuda_graphs == "none"]
MEGATRON = software_profiles(use_env=False)["megatron"]


def _estimate(model: str, instance: str, graphs: CudaGraphs | None, layout: Layout):
    system = system_for_instance(CATALOG, instance, 8)
    software = software_for("megatron", system.accelerator.family, accelerator=system.accelerator.id)
    software = software.model_copy(update={"cuda_graphs": graphs})
    job = TrainingJob(global_batch=256, seq_len=4096)
    return estimate_training(load_model(model), system, layout, job, software=software)


LAYOUT = Layout(tp=1, pp=1, dp=32, ep=32, micro_batch=1)


def _overhead(estimate) -> float:  # type: ignore[no-untyped-def]
    return next(t.exposed_s for t in estimate.terms if t.name == "framework overhead")


def test_a_graphless_moe_step_on_grace_waits_for_its_host_by_the_layers_host_time_less_the_gpus() -> None:
    eager = _estimate("qwen3-30b-a3b", "p6e-gb200.36xlarge", CudaGraphs.NONE, LAYOUT)
    graphed = _estimate("qwen3-30b-a3b", "p6e-gb200.36xlarge", CudaGraphs.FULL, LAYOUT)
    unsaid = _estimate("qwen3-30b-a3b", "p6e-gb200.36xlarge", None, LAYOUT)
    model = load_model("qwen3-30b-a3b")
    micro_batches = 256 // 32
    host_mb = model.moe_layers * MEGATRON.eager_moe_layer_s["gb200"] * host_time_scale(model)
    gpu_mb = sum(t.exposed_s for t in graphed.terms if t.name in ("forward", "backward", "recompute", "ep comm"))
    gpu_mb = (gpu_mb + sum(t.exposed_s for t in graphed.terms if t.name in ("tp comm", "cp comm", "pp comm"))) / 8
    assert host_mb > gpu_mb  # a 3B-active model's layers are short beside 34 ms of launches
    assert _overhead(eager) == pytest.approx(micro_batches * (host_mb - gpu_mb), rel=1e-6)
    assert _overhead(graphed) == _overhead(unsaid) == 0.0
    assert eager.step_s == pytest.approx(graphed.step_s + _overhead(eager), rel=1e-9)


def test_no_wait_for_a_dense_model_or_a_host_the_profile_has_no_time_for() -> None:
    dense = Layout(tp=1, pp=1, dp=32, micro_batch=1)
    assert _overhead(_estimate("llama3.1-8b", "p6e-gb200.36xlarge", CudaGraphs.NONE, dense)) == 0.0
    note = graphs_note(MEGATRON.model_copy(update={"cuda_graphs": CudaGraphs.NONE}), load_model("llama3.1-8b"), "gb200")
    assert note is not None and "not priced for a dense model" in note  # the flag is said, not dropped
    assert "h100-sxm" not in MEGATRON.eager_moe_layer_s and "b200" not in MEGATRON.eager_moe_layer_s
    x86 = Layout(tp=1, pp=1, dp=64, ep=32, micro_batch=1)
    assert _overhead(_estimate("qwen3-30b-a3b", "p5.48xlarge", CudaGraphs.NONE, x86)) == 0.0


def _errors(cases, seconds: float, field: str = "eager_moe_layer_s") -> list[float]:  # type: ignore[no-untyped-def]
    """Each case's predicted / measured - 1 with the profiles' Grace host time ``field`` at ``seconds``."""
    profiles = {
        name: p.model_copy(update={field: {"gb200": seconds, "gb300": seconds}})
        for name, p in software_profiles(use_env=False).items()
    }
    out = []
    for case in cases:
        field = primary_field(case)
        predicted = case_value(case, case_estimator(case, CATALOG, profiles)(None), field)
        out.append(predicted / case.measured[field] - 1.0)
    return out


def _objective(seconds: float) -> float:
    """The mean over the two sources of the mean |log error|, as the profile's note states it."""
    return float(np.mean([np.mean([abs(math.log1p(e)) for e in _errors(s, seconds)]) for s in (DGXC, BASELINE)]))


def test_the_host_time_is_the_scan_of_two_sources_and_maverick_checks_it() -> None:
    assert len(DGXC) == 3 and len(BASELINE) == 1 and len(MAVERICK) == 6
    assert all(c.software is not None and c.software.cuda_graphs == "none" for c in DGXC + BASELINE + MAVERICK)
    chosen = MEGATRON.eager_moe_layer_s["gb200"]
    assert chosen == MEGATRON.eager_moe_layer_s["gb300"] == 0.034
    grid = np.arange(0.026, 0.0381, 0.002)
    assert _objective(chosen) <= min(_objective(s) for s in grid) + 0.002
    assert _objective(0.0) > 0.8 and _objective(chosen) < 0.06  # the DeepSeek-V3 rows' 69-83% miss, closed
    assert max(abs(e) for e in _errors(MAVERICK, chosen)) < 0.17  # out of sample: GPU-bound BF16, FP8 at the floor


def _runs(graphs: CudaGraphs):  # type: ignore[no-untyped-def]
    """Qwen3-30B-A3B on two x86 (p5) and two Grace (GB200) instances with ``graphs``, the layout chosen."""
    from clustersim.scenario.schema import SystemSpec, TrainingJobSpec
    from clustersim.scenario.training import run_training, training_scenario

    return {
        instance: run_training(
            training_scenario(
                model="qwen3-30b-a3b", system=SystemSpec(instance=instance, nodes=2), layout="choose",
                job=TrainingJobSpec(global_batch=256, seq_len=4096), cuda_graphs=graphs,
            )
        )
        for instance in ("p5.48xlarge", "p6e-gb200.36xlarge")
    }  # fmt: skip


def test_explain_says_the_wait_is_not_priced_on_an_x86_host(tmp_path: Path) -> None:
    from clustersim.cli.explain_log import host_caveat, read_log
    from tests.ingest.test_training_logs import _moe_log

    logged = read_log(_moe_log(tmp_path, cuda_graph_impl="none"))
    on = {
        instance: (host_caveat(logged, run), [n for n in run.estimate.notes if n.startswith("no CUDA graphs")])
        for instance, run in _runs(CudaGraphs.NONE).items()
    }
    assert on["p6e-gb200.36xlarge"] == ([], ["no CUDA graphs: each MoE layer's launches take 23.6 ms of host time per "
                                              "micro-batch on gb200's host (34 ms a DeepSeek-V3 layer, in proportion "
                                              "to the launches); the step waits where the GPU's work is shorter (in "
                                              "'framework overhead')"])  # fmt: skip
    (caveat,), (note,) = on["p5.48xlarge"]
    assert "without CUDA graphs" in caveat and "not on h100-sxm's" in caveat and "gb200, gb300" in caveat
    assert note == (
        "no CUDA graphs: the host's kernel launches are not priced on h100-sxm's host (megatron's profile has a time "
        "for gb200, gb300's)"
    )


def test_explain_says_a_partial_graph_wait_is_not_priced_on_an_x86_host(tmp_path: Path) -> None:
    from clustersim.cli.explain_log import host_caveat, read_log
    from tests.ingest.test_training_logs import _moe_log

    log = _moe_log(tmp_path, cuda_graph_impl="transformer_engine", cuda_graph_scope="['attn', 'moe_router']")
    logged = read_log(log)
    assert logged.cuda_graphs == "partial"
    caveats = {instance: host_caveat(logged, run) for instance, run in _runs(CudaGraphs.PARTIAL).items()}
    assert caveats["p6e-gb200.36xlarge"] == []  # priced on Grace: nothing left out
    (caveat,) = caveats["p5.48xlarge"]
    assert caveat.startswith("the log ran with partial CUDA graphs (line ")
    assert "routed experts" in caveat and "not on h100-sxm's" in caveat and "gb200, gb300's host" in caveat


def test_a_serving_case_cannot_state_a_training_runs_graphs() -> None:
    from clustersim.validation.cases import read_cases as read
    from clustersim.validation.inference import case_deployment

    case = read(project_dir() / "inference.jsonl")[0].model_dump(mode="json")
    case["software"] = {**(case.get("software") or {}), "cuda_graphs": "none"}
    with pytest.raises(ClusterSimError, match=r"software\.cuda_graphs is a training setting"):
        case_deployment(case, CATALOG)


def test_each_layout_of_a_planners_systems_takes_its_own_hosts_time() -> None:
    from clustersim.training.host_launches import per_layout
    from clustersim.training.pricing import Systems

    gb200, b200 = (
        system_for_instance(CATALOG, "p6e-gb200.36xlarge", 2),
        system_for_instance(CATALOG, "p6-b200.48xlarge", 1),
    )
    table = {"gb200": 0.034}
    assert list(per_layout(Systems((gb200, b200), np.array([1, 0, 1])), table)) == [0.0, 0.034, 0.0]
    assert per_layout(gb200, table) == 0.034 and per_layout(b200, table) == 0.0


def test_the_gpus_share_counts_its_recompute_and_exposed_tensor_parallel_exchanges() -> None:
    """What the GPU does meanwhile is every per-micro-batch term it runs: a fully recomputed TP2 layout without TP
    overlap exposes recompute and TP communication, and the wait is the host's time less all of them."""
    layout = Layout(tp=2, pp=1, dp=16, ep=16, micro_batch=1, recompute="full", sequence_parallel=True)
    system = system_for_instance(CATALOG, "p6e-gb200.36xlarge", 8)
    software = software_for("megatron", system.accelerator.family, accelerator=system.accelerator.id)
    job = TrainingJob(global_batch=256, seq_len=4096)
    model = load_model("qwen3-30b-a3b")

    def run(graphs: CudaGraphs | None):  # type: ignore[no-untyped-def]
        sw = software.model_copy(update={"cuda_graphs": graphs, "tp_overlap": False})
        return estimate_training(model, system, layout, job, software=sw)

    eager, graphed = run(CudaGraphs.NONE), run(None)
    terms = {t.name: t.exposed_s for t in graphed.terms}
    assert terms["recompute"] > 0 and terms["tp comm"] > 0
    per_mb = ("forward", "backward", "recompute", "tp comm", "cp comm", "ep comm", "pp comm")
    micro_batches = 256 // 16
    gpu_mb = sum(terms[name] for name in per_mb) / micro_batches
    host_mb = model.moe_layers * MEGATRON.eager_moe_layer_s["gb200"] * host_time_scale(model)
    assert _overhead(eager) == pytest.approx(micro_batches * max(host_mb - gpu_mb, 0.0), rel=1e-6)


def test_a_profile_with_no_host_time_says_so() -> None:
    software = software_profiles(use_env=False)["torchtitan"].model_copy(update={"cuda_graphs": CudaGraphs.NONE})
    note = graphs_note(software, load_model("qwen3-30b-a3b"), "gb200")
    assert note == (
        "no CUDA graphs: the host's kernel launches are not priced on gb200's host (torchtitan's profile has a time "
        "for no accelerator's)"
    )
    assert graphs_note(MEGATRON, load_model("qwen3-30b-a3b"), "gb200") is None  # graphs not stated


# Partial CUDA graphs: the routed experts run eagerly after a device-host sync, a wait per MoE layer and micro-batch.
PARTIAL_ROWS = [
    c
    for c in CASES.values()
    if c.software is not None
    and c.software.cuda_graphs == "partial"
    and c.system is not None
    and c.system.accelerator in ("gb200", "gb300")
    and "hybridep_final" not in c.id
]
FINAL = CASES["mlm_deepseek-v3_gb200_256gpu_tp1_pp8_vp4_ep32_mxfp8_hybridep_final"]


def test_partial_graphs_on_grace_wait_a_fixed_time_per_moe_layer_and_micro_batch() -> None:
    partial = _estimate("qwen3-30b-a3b", "p6e-gb200.36xlarge", CudaGraphs.PARTIAL, LAYOUT)
    full = _estimate("qwen3-30b-a3b", "p6e-gb200.36xlarge", CudaGraphs.FULL, LAYOUT)
    unsaid = _estimate("qwen3-30b-a3b", "p6e-gb200.36xlarge", None, LAYOUT)
    model = load_model("qwen3-30b-a3b")
    per_layer = MEGATRON.partial_graph_moe_layer_s["gb200"]
    assert per_layer == MEGATRON.partial_graph_moe_layer_s["gb300"] == 0.00158
    assert _overhead(partial) == pytest.approx((256 // 32) * model.moe_layers * per_layer, rel=1e-9)
    assert _overhead(full) == _overhead(unsaid) == 0.0
    assert partial.step_s == pytest.approx(full.step_s + _overhead(partial), rel=1e-9)
    dense = Layout(tp=1, pp=1, dp=32, micro_batch=1)
    assert _overhead(_estimate("llama3.1-8b", "p6e-gb200.36xlarge", CudaGraphs.PARTIAL, dense)) == 0.0
    x86 = Layout(tp=1, pp=1, dp=64, ep=32, micro_batch=1)
    assert _overhead(_estimate("qwen3-30b-a3b", "p5.48xlarge", CudaGraphs.PARTIAL, x86)) == 0.0


def test_only_the_moe_layers_wait() -> None:
    """DeepSeek-V3's first three layers are dense: a micro-batch waits at the stack's MoE share of the layers it runs
    (its 61 and the multi-token-prediction block's), 58/61 of 62, not at each of them."""
    partial = _estimate("deepseek-v3", "p6e-gb200.36xlarge", CudaGraphs.PARTIAL, LAYOUT)
    full = _estimate("deepseek-v3", "p6e-gb200.36xlarge", CudaGraphs.FULL, LAYOUT)
    model = load_model("deepseek-v3")
    waits = (_overhead(partial) - _overhead(full)) / (256 // 32) / MEGATRON.partial_graph_moe_layer_s["gb200"]
    assert (model.moe_layers, model.layers, model.mtp_layers) == (58, 61, 1)
    assert waits == pytest.approx(62 * 58 / 61, rel=1e-9)


def test_partial_graph_notes_say_what_is_priced_and_where_not() -> None:
    partial = MEGATRON.model_copy(update={"cuda_graphs": CudaGraphs.PARTIAL})
    assert graphs_note(partial, load_model("qwen3-30b-a3b"), "gb300") == (
        "partial CUDA graphs: the routed experts run eagerly after a device-host sync; the GPU waits 1.58 ms per MoE "
        "layer and micro-batch for gb300's host (in 'framework overhead')"
    )
    assert graphs_note(partial, load_model("qwen3-30b-a3b"), "b200") == (
        "partial CUDA graphs: the routed experts' launches after their device-host sync are not priced on b200's "
        "host (megatron's profile has a time for gb200, gb300's)"
    )
    assert graphs_note(partial, load_model("llama3.1-8b"), "gb200") is None


def test_the_partial_wait_is_the_writeups_tenth_and_the_other_sources_runs_check_it() -> None:
    """The prior: at the Megatron-Core write-up's final DeepSeek-V3 GB200 run (partial capture) the wait is the share
    of the measured step a 10% faster rate would remove, 1 - 1/1.1 (its 'at least a 10% additional performance
    gain' from graphing the routed experts too). Held out: the other GB200 and GB300 runs stating partial capture
    (Megatron-Bridge's Nemotron 3 and gpt-oss recipes, dgxc's Grok-1) come closer with it than without."""
    estimate = case_estimator(FINAL, CATALOG, software_profiles(use_env=False))(None)
    field = primary_field(FINAL)
    measured_step_s = estimate.step_s * case_value(FINAL, estimate, field) / FINAL.measured[field]
    assert measured_step_s == pytest.approx(8.46, abs=0.01)
    assert _overhead(estimate) / measured_step_s == pytest.approx(1 - 1 / 1.1, rel=0.01)
    assert len(PARTIAL_ROWS) >= 40

    def mape(seconds: float) -> float:
        return float(np.mean([abs(e) for e in _errors(PARTIAL_ROWS, seconds, "partial_graph_moe_layer_s")]))

    assert mape(0.0) > 0.15 and mape(MEGATRON.partial_graph_moe_layer_s["gb200"]) < 0.075


def _context(graphs: CudaGraphs | None, **exposed: float):  # type: ignore[no-untyped-def]
    """A stand-in for a StepContext with three layouts on a GB200: what the two waits read, and nothing else."""
    from types import SimpleNamespace

    sw = MEGATRON.model_copy(update={"cuda_graphs": graphs})
    model = load_model("qwen3-30b-a3b")  # every one of its 48 layers MoE
    system = SimpleNamespace(accelerator=SimpleNamespace(id="gb200"))
    times = {
        name: SimpleNamespace(exposed_s=np.full(3, exposed.get(name, 0.0))) for name in ("tp_mb", "cp_mb", "ep_mb")
    }
    return SimpleNamespace(
        sw=sw, model=model, system=system, tokens=np.full(3, 4096.0), micro_batches=np.array([2.0, 4.0, 8.0]),
        layers_here=np.array([40.0, 20.0, 10.0]), fwd_mb=np.full(3, 0.1), bwd_mb=np.full(3, 0.2),
        rec_mb=np.zeros(3), pp_mb=np.zeros(3), **times,
    )  # fmt: skip


def test_the_graphless_wait_takes_every_exposed_exchange_of_the_micro_batch_off_the_hosts_time() -> None:
    from clustersim.training.host_launches import eager_wait_s

    ctx = _context(CudaGraphs.NONE, tp_mb=0.01, cp_mb=0.02, ep_mb=0.03)
    host = ctx.layers_here * 0.034 * host_time_scale(ctx.model)
    gpu = 0.1 + 0.2 + 0.01 + 0.02 + 0.03
    assert eager_wait_s(ctx) == pytest.approx(ctx.micro_batches * np.maximum(host - gpu, 0.0), rel=1e-12)
    for graphs in (CudaGraphs.PARTIAL, CudaGraphs.FULL, None):
        none = eager_wait_s(_context(graphs))
        assert none.shape == (3,) and not none.any()  # one zero per layout


def test_the_partial_wait_is_per_moe_layer_and_micro_batch_per_layout() -> None:
    from clustersim.training.host_launches import partial_graph_wait_s

    waits = partial_graph_wait_s(_context(CudaGraphs.PARTIAL, cp_mb=1.0))  # the GPU's work does not hide it
    assert waits == pytest.approx(np.array([2 * 40, 4 * 20, 8 * 10]) * 0.00158, rel=1e-12)
    for graphs in (CudaGraphs.NONE, CudaGraphs.FULL, None):
        none = partial_graph_wait_s(_context(graphs))
        assert none.shape == (3,) and not none.any()


def test_a_profile_with_no_partial_wait_says_so() -> None:
    software = software_profiles(use_env=False)["torchtitan"].model_copy(update={"cuda_graphs": CudaGraphs.PARTIAL})
    assert graphs_note(software, load_model("qwen3-30b-a3b"), "gb200") == (
        "partial CUDA graphs: the routed experts' launches after their device-host sync are not priced on gb200's "
        "host (torchtitan's profile has a time for no accelerator's)"
    )


def test_a_layers_host_time_follows_its_launches_from_deepseek_v3s() -> None:
    """The graph-less host time was measured on DeepSeek-V3: its layer keeps it whole (the reference count is its
    layers' own), and a layer of fewer launches takes less, so gpt-oss-120b's two graph-less GB200 runs (14 launches a
    layer against 21.7), held out, come closer (mean |error| from 23% to under 13%) while the fit's own rows do not
    move."""
    from clustersim.workload.launches import layer_launches

    deepseek = load_model("deepseek-v3")
    assert layer_launches(deepseek, quantized=False, tensor_parallel=False) == pytest.approx(DEEPSEEK_V3_LAYER_LAUNCHES)
    assert host_time_scale(deepseek) == pytest.approx(1.0)
    assert host_time_scale(load_model("gpt-oss-120b")) == pytest.approx(14.0 / DEEPSEEK_V3_LAYER_LAUNCHES)
    assert len(GPT_OSS_EAGER) == 2
    unscaled = [e for e in _errors(GPT_OSS_EAGER, MEGATRON.eager_moe_layer_s["gb200"] / host_time_scale(
        load_model("gpt-oss-120b")))]  # fmt: skip
    scaled = _errors(GPT_OSS_EAGER, MEGATRON.eager_moe_layer_s["gb200"])
    assert np.mean(np.abs(unscaled)) > 0.2 and np.mean(np.abs(scaled)) < 0.13
