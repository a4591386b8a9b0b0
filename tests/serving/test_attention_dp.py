"""Attention data parallel (TensorRT-LLM's DEP layouts): groups of ranks sharing a MoE model's experts."""

from __future__ import annotations

import numpy as np
import pytest

from clustersim.catalog.kinds import Dtype
from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import serving_system_for_instance, step_times
from clustersim.serving.engines import engine_profile
from clustersim.serving.estimate import Request, batch_limit
from clustersim.serving.formats import BlockFp4
from clustersim.serving.memory import kv_bytes_per_token, matmul_params, weight_bytes_per_device
from clustersim.serving.simulate import Load, simulate
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
QWEN = load_model("qwen3-235b-a22b")
DSV3 = load_model("deepseek-v3")


def _system(tp: int, groups: int = 1, instance: str = "p6-b200.48xlarge"):
    return serving_system_for_instance(CATALOG, instance, tp=tp, attention_dp=groups, dp=1)


def _step(system, decoders: float, model=QWEN, prefill: float = 0.0):
    return step_times(
        model, system, BlockFp4.NVFP4, Dtype.FP8, decode_sequences=decoders, decode_context_tokens=1500.0,
        prefill_tokens=prefill, prefill_sequences=prefill / 1000.0, prompt_tokens=1000.0,
    )  # fmt: skip


def test_a_group_holds_the_dense_weights_whole_and_its_share_of_the_experts():
    dense, expert = matmul_params(QWEN)
    routed = QWEN.moe.experts * expert
    rest = QWEN.num_params() - dense - routed
    held = weight_bytes_per_device(QWEN, Dtype.FP8, tp=1, attention_dp=4)
    assert held == pytest.approx((dense + routed / 4) * 1.0 + rest * 2.0)
    # tensor parallelism splits the dense weights too: DEP4 holds more per device than TP4, less than TP1
    assert weight_bytes_per_device(QWEN, Dtype.FP8, tp=4) < held < weight_bytes_per_device(QWEN, Dtype.FP8, tp=1)
    assert _system(1, 4).replica_devices == 4 and _system(1, 4).num_devices == 4


def test_each_group_caches_its_own_sequences_so_a_latent_is_held_once_per_rank():
    request = Request(input_tokens=1000, output_tokens=1000, precision=BlockFp4.NVFP4, kv_precision=Dtype.FP8)
    fixed = engine_profile("tensorrt-llm").model_copy(update={"benchmark_sizing": "fixed"})  # caps 4096 per rank
    dep, _, dep_plan = batch_limit(DSV3, _system(1, 8), request, engine=fixed)
    tp, _, tp_plan = batch_limit(DSV3, _system(8), request, engine=fixed)
    # MLA's latent is whole on every TP rank; under DEP each rank caches only its group's sequences
    assert dep_plan.kv_bytes_per_token == kv_bytes_per_token(DSV3, Dtype.FP8) == tp_plan.kv_bytes_per_token
    per_rank = dep_plan.kv_capacity_tokens // 2000
    assert dep >= min(8 * per_rank, 8 * 4096) * 0.99 and dep > 3 * tp


def test_a_groups_step_is_its_share_of_the_attention_and_gathers_every_token_for_the_experts():
    one, four = _system(1), _system(1, 4)
    alone, shared = _step(one, 256.0), _step(four, 1024.0)
    # each of four groups reads the KV of its 256 sequences, as one replica of 256 does
    assert shared.decode_attention_s == pytest.approx(alone.decode_attention_s)
    assert alone.communication_s == 0.0 and shared.communication_s > 0.0  # the experts' exchange
    # the exchange carries every token of the stage: twice the tokens, more time
    assert _step(four, 2048.0).communication_s > shared.communication_s
    # four groups of 256 sequences run one expert GEMM over all 1,024 tokens: under four times one group's work
    assert shared.gemm_compute_s < 4.0 * alone.gemm_compute_s
    for name in ("gemm_compute_s", "decode_attention_s", "communication_s", "overhead_s"):
        assert np.all(np.isfinite(getattr(_step(four, np.array([8.0, 512.0, 4096.0])), name)))


def test_one_group_prices_as_before():
    plain = serving_system_for_instance(CATALOG, "p6-b200.48xlarge", tp=2, dp=1)
    assert _step(plain, 300.0, prefill=2000.0) == _step(_system(2, 1), 300.0, prefill=2000.0)


@pytest.mark.parametrize(
    ("model", "groups", "instance", "engine", "match"),
    [
        ("llama3.1-70b", 4, "p6-b200.48xlarge", None, "is dense, so its groups would be independent replicas"),
        ("mixtral-8x7b", 4, "p5.48xlarge", None, "6 experts do not split evenly over tp 1 x attention dp 4"),
        ("qwen3-30b-a3b", 4, "trn2.48xlarge", None, "has no data-parallel attention"),
    ],
)
def test_refusals_name_attention_dp(model, groups, instance, engine, match):
    request = Request(input_tokens=1000, output_tokens=100)
    transformer = load_model(model)
    if "mixtral" in model:
        transformer = transformer.model_copy(update={"moe": transformer.moe.model_copy(update={"experts": 6})})
    with pytest.raises(ClusterSimError, match=match) as caught:
        batch_limit(transformer, _system(1, groups, instance), request, engine=engine)
    assert caught.value.field == "attention_dp"


def test_groups_that_do_not_fit_the_instance_and_the_simulator_are_refused():
    with pytest.raises(ClusterSimError, match="attention_dp: 16 groups of tp 1 x pp 1 must fit the 8 devices"):
        _system(1, 16)
    with pytest.raises(ClusterSimError, match="the request simulator schedules one queue per replica"):
        simulate(QWEN, _system(1, 4), Request(input_tokens=100, output_tokens=10), Load(concurrency=4), requests=8)


def test_attention_dp_residuals_size_only_attention_dp_deployments_intervals():
    from clustersim.intervals import Residual, ResidualTable, spread_for

    def rows(r: float, layout: tuple[str, ...]) -> list[Residual]:
        return [
            Residual(f"{layout}{i}", f"src{i % 3}", "inference", "blackwell", "b200", "tensorrt-llm", 8,
                     "output_tokens_per_s", r * (1 if i % 2 else -1), layout)
            for i in range(30)
        ]  # fmt: skip

    table = ResidualTable((*rows(0.05, ()), *rows(0.5, ("attention_dp",))))
    query = {"accelerator": "b200", "family": "blackwell", "framework": "tensorrt-llm", "devices": 8, "table": table}
    plain = spread_for("inference", **query)
    dep = spread_for("inference", **query, layout=("attention_dp",))
    assert plain is not None and dep is not None
    assert plain.q_hi == pytest.approx(0.05) and plain.cases == 30  # the tensor-parallel runs only
    assert dep.q_hi == pytest.approx(0.5) and dep.cases == 60  # both: its own runs and the plain ones
