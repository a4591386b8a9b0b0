"""CUDA graphs with padding (``EngineProfile.graph_batch_sizes``): a step of decoders alone replays the graph of
the smallest captured size holding its batch; its dummy rows run the GEMMs, not attention."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from clustersim.catalog.kinds import Dtype
from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import default_calibration, serving_system_for_instance, step_times
from clustersim.serving.engines import engine_profile
from clustersim.serving.formats import BlockFp4
from clustersim.serving.graphs import graph_rows
from clustersim.serving.sim_steps import step_table
from clustersim.validation.inference import case_estimate
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
QWEN = load_model("qwen3-235b-a22b")
LLAMA = load_model("llama3.1-8b")
SIZES = (128, 256, 384, 512)  # NVIDIA's MLPerf v5.1 DeepSeek-R1 server config on 8 B200
GRAPHS = engine_profile("tensorrt-llm").model_copy(update={"graph_batch_sizes": SIZES})
EAGER = engine_profile("tensorrt-llm")


def _step(system, decoders: float, engine, model=QWEN, prefill: float = 0.0, weights=BlockFp4.NVFP4):
    return step_times(
        model, system, weights, Dtype.FP8, decode_sequences=decoders, decode_context_tokens=1500.0,
        prefill_tokens=prefill, prefill_sequences=prefill / 1000.0, prompt_tokens=1000.0, engine=engine,
    )  # fmt: skip


def test_a_batch_rounds_up_to_the_smallest_captured_size_and_runs_as_it_is_beyond_the_largest():
    rows = graph_rows(SIZES, np.array([1.0, 128.0, 129.0, 164.0, 384.0, 512.0, 600.0]))
    assert rows.tolist() == [128.0, 128.0, 256.0, 256.0, 384.0, 512.0, 600.0]
    # a mean share under one sequence: that share of the smallest graph (the steps it decodes in run 128 rows)
    assert float(graph_rows(SIZES, 0.25)) == pytest.approx(32.0)
    # under attention DP every rank pads to one size: 8 ranks of 164 run 8 x 256
    assert float(graph_rows(SIZES, 1312.0, groups=8)) == 2048.0
    assert float(graph_rows(None, 164.0)) == 164.0 and float(graph_rows(SIZES, 0.0)) == 0.0


def test_a_decode_step_runs_its_gemms_at_the_graph_size_and_its_attention_at_the_live_batch():
    dep = serving_system_for_instance(CATALOG, "p6-b200.48xlarge", tp=1, attention_dp=8, dp=1)
    padded, live, full = _step(dep, 8 * 164.0, GRAPHS), _step(dep, 8 * 164.0, EAGER), _step(dep, 8 * 256.0, EAGER)
    assert float(padded.gemm_s) == pytest.approx(float(full.gemm_s), rel=1e-12)
    assert float(padded.communication_s) == pytest.approx(float(full.communication_s), rel=1e-12)
    assert float(padded.elementwise_s) == pytest.approx(float(full.elementwise_s), rel=1e-12)
    assert float(padded.gemm_s) > 1.2 * float(live.gemm_s)
    # the dummy sequences hold no context: attention reads the live sequences' cache (and the rows' new tokens)
    assert float(padded.decode_attention_s) < 1.01 * float(live.decode_attention_s)
    assert float(padded.overhead_s) == pytest.approx(float(live.overhead_s), rel=1e-12)


def test_a_step_with_a_prompt_runs_eagerly_unpadded():
    one = serving_system_for_instance(CATALOG, "p5.48xlarge", tp=1, dp=1)
    mixed = _step(one, 164.0, GRAPHS, model=LLAMA, prefill=1000.0, weights=Dtype.FP8)
    eager = _step(one, 164.0, EAGER, model=LLAMA, prefill=1000.0, weights=Dtype.FP8)
    assert float(mixed.step_s) == pytest.approx(float(eager.step_s), rel=1e-12)
    alone = _step(one, 164.0, GRAPHS, model=LLAMA, weights=Dtype.FP8)
    assert float(alone.step_s) > float(_step(one, 164.0, EAGER, model=LLAMA, weights=Dtype.FP8).step_s)


def test_the_simulators_step_table_pads_a_decode_step_as_the_step_model_does():
    one = serving_system_for_instance(CATALOG, "p5.48xlarge", tp=1, dp=1)
    table = step_table(
        LLAMA, one, Dtype.FP8, Dtype.FP8, max_tokens=8192, max_sequences=512, max_context=4096,
        cal=default_calibration(), engine=GRAPHS,
    )  # fmt: skip
    for decoders in (20, 164, 300):
        exact = float(_step(one, float(decoders), GRAPHS, model=LLAMA, weights=Dtype.FP8).step_s)
        tabled = table.step_s(decoders, 1500.0, 0.0, 0, 0.0)
        assert tabled == pytest.approx(exact, rel=0.02)
        assert float(table.decode_steps_s(decoders, np.array([1500.0]))[0]) == pytest.approx(exact, rel=0.02)


def _dsr1_server() -> dict:
    path = Path(__file__).parents[2] / "src/clustersim/validation/project/inference.jsonl"
    rows = (json.loads(line) for line in path.read_text().splitlines())
    return next(r for r in rows if r["id"] == "mlperf51_deepseek-r1_8xb200_server")


def test_a_case_states_its_graphs_and_a_list_out_of_order_is_refused():
    case = _dsr1_server()
    case["workload"]["engine_settings"].pop("graph_batch_sizes", None)
    case["workload"]["request_rate_per_s"] = 5.02  # the run's rate: the batch the engine holds there
    eager = case_estimate(case, CATALOG)
    case["workload"]["engine_settings"]["graph_batch_sizes"] = [128, 256, 384, 512]
    graphed = case_estimate(case, CATALOG)
    assert graphed.tpot_s > 1.05 * eager.tpot_s
    case["workload"]["engine_settings"]["graph_batch_sizes"] = [256, 128]
    with pytest.raises((ClusterSimError, ValidationError), match=r"graph_batch_sizes.*ascending"):
        case_estimate(case, CATALOG)
