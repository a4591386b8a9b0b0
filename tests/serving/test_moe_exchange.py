"""How attention-DP ranks bring tokens to the experts: a gather and reduce-scatter, or an all-to-all."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from clustersim.catalog.kinds import Dtype
from clustersim.catalog.registry import load_catalog
from clustersim.cli.app import app
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import serving_system_for_instance, step_times
from clustersim.serving.estimate import Request
from clustersim.serving.formats import BlockFp4
from clustersim.serving.latency import estimate_server
from clustersim.serving.moe_exchange import exchange_s, ranks_reached, routed_token_share
from clustersim.validation.inference import case_deployment
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
DSV3 = load_model("deepseek-v3")
PROJECT = Path(__file__).parents[2] / "src/clustersim/validation/project/inference.jsonl"


def _system(exchange: str, groups: int = 8):
    return serving_system_for_instance(
        CATALOG, "p6-b200.48xlarge", tp=1, attention_dp=groups, dp=1, moe_exchange=exchange
    )


def test_a_token_reaches_the_ranks_its_experts_sit_on():
    assert ranks_reached(8, 8) == pytest.approx(8 * (1 - (7 / 8) ** 8))  # 5.25 of 8 ranks for DeepSeek's top 8
    assert ranks_reached(1, 8) == 1.0 and ranks_reached(8, 1) == pytest.approx(1.0)
    assert ranks_reached(1024, 8) == pytest.approx(8.0, rel=0.01)  # spread wide, every expert on its own rank


@settings(max_examples=50, deadline=None)
@given(ranks=st.integers(1, 512), top_k=st.integers(1, 16))
def test_a_rank_routes_between_its_own_share_and_every_token(ranks, top_k):
    reached = ranks_reached(ranks, top_k)
    assert 1.0 - 1e-12 <= reached <= min(ranks, top_k) + 1e-12


def test_an_all_to_all_moves_and_routes_less_than_a_gather():
    tokens = np.array([512.0, 4096.0])
    gather, alltoall = _system("gather"), _system("alltoall")
    assert routed_token_share(DSV3, gather) == 1.0
    assert routed_token_share(DSV3, alltoall) == pytest.approx(ranks_reached(8, 8) / 8)
    assert np.all(exchange_s(DSV3, alltoall, tokens) < exchange_s(DSV3, gather, tokens))
    steps = [
        step_times(
            DSV3, system, BlockFp4.NVFP4, Dtype.FP8, decode_sequences=tokens, decode_context_tokens=2000.0,
            prefill_tokens=0.0 * tokens, prefill_sequences=0.0 * tokens, prompt_tokens=1000.0,
        )
        for system in (gather, alltoall)
    ]  # fmt: skip
    assert np.all(steps[1].gemm_compute_s < steps[0].gemm_compute_s)  # the routing of 66% of the tokens, not all
    assert np.all(steps[1].decode_attention_s == steps[0].decode_attention_s)  # attention is the groups' own


def test_an_exchange_without_groups_or_of_an_unknown_kind_is_refused():
    with pytest.raises(ClusterSimError, match=r"moe_exchange: 'alltoall'.*attention_dp above 1, got 1"):
        _system("alltoall", groups=1)
    with pytest.raises(ClusterSimError, match="moe_exchange: 'ring' \\(valid: gather, alltoall"):
        _system("ring")


def _case(case_id: str) -> dict:
    return next(row for line in PROJECT.read_text().splitlines() if (row := json.loads(line))["id"] == case_id)


def test_a_case_states_its_exchange_as_its_dispatcher():
    case = _case("mlperf51_deepseek-r1_72xgb300_offline")
    assert case["parallel"]["ep_dispatcher"] == "alltoall"
    assert case_deployment(case, CATALOG).serving.moe_exchange == "alltoall"
    case["parallel"].pop("ep_dispatcher")
    assert case_deployment(case, CATALOG).serving.moe_exchange == "gather"  # TensorRT-LLM's default
    case["parallel"].update(attention_dp=None, ep_dispatcher="deepep", dp=72)
    with pytest.raises(ClusterSimError, match=r"parallel.ep_dispatcher 'deepep'.*only under attention data parallel"):
        case_deployment(case, CATALOG)


def test_a_servers_latency_curve_is_its_own_exchanges():
    # the server curve is memoized per deployment: a gather and an all-to-all of one layout are two curves
    request = Request(input_tokens=1000, output_tokens=1000, precision=BlockFp4.NVFP4, kv_precision=Dtype.FP8)
    gather = _system("gather")
    alltoall = dataclasses.replace(gather, moe_exchange="alltoall")  # the same devices and fabrics
    tpot = [estimate_server(DSV3, system, request, 2.0).tpot_s for system in (gather, alltoall)]
    assert tpot[1] < tpot[0]


@pytest.mark.parametrize(
    ("extra", "flag"),
    [(["--moe-exchange", "alltoall"], "--moe-exchange"), (["--tp", "1", "--attention-dp", "8"], "--attention-dp")],
)
def test_the_simulator_refuses_attention_dp_and_its_exchange_naming_the_flag(extra, flag):
    args = [
        "serve",
        "deepseek-v3",
        "--instance",
        "p6-b200.48xlarge",
        "--precision",
        "nvfp4",
        "--simulate",
        "--rate",
        "1",
    ]
    result = CliRunner().invoke(app, [*args, *extra], env={"CLUSTERSIM_CATALOG": ""})
    assert result.exit_code == 2
    assert f"{flag}: " in result.output and "priced by the closed forms only" in result.output
