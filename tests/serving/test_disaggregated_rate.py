"""The disaggregated server's closed form: each pool's rate, the smaller binding, and the latency at a rate."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.disaggregated_rate import disaggregated_max_rate, disaggregated_server
from clustersim.serving.disaggregation import Pools, deploy
from clustersim.serving.engine import default_calibration
from clustersim.serving.estimate import Request, deployment_profile, request_steps
from clustersim.serving.latency import estimate_server, max_rate
from clustersim.serving.sim_disaggregated import simulate_disaggregated
from clustersim.serving.simulate import Load
from clustersim.validation.cases import project_dir
from clustersim.validation.inference import fits_reference_calibration, predict_inference_case
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
MODEL = load_model("llama3.1-8b", use_env=False)
REQUEST = Request(1024.0, 256.0)
ENGINE = "tensorrt-llm"


def _deployment(prefill_workers: int, decode_workers: int):
    return deploy(CATALOG, "p5.48xlarge", Pools(prefill_workers, decode_workers), 1, MODEL, REQUEST.kv)


def _rate(prefill_workers: int, decode_workers: int, tpot_target_s: float = 0.02):
    d = _deployment(prefill_workers, decode_workers)
    return disaggregated_max_rate(
        MODEL, d.prefill, d.decode, REQUEST, transfer_s=d.transfer_one_s(REQUEST.input_tokens),
        ttft_target_s=1.0, tpot_target_s=tpot_target_s, prefill_engine=ENGINE, decode_engine=ENGINE,
    )  # fmt: skip


def test_the_deployment_serves_the_smaller_pools_rate_and_more_decoders_move_the_binding_pool():
    few, many = _rate(4, 1), _rate(1, 7)
    assert few.rate_per_s == pytest.approx(min(few.prefill_rate_per_s, few.decode_rate_per_s))
    assert few.bound == "decode" and many.bound == "prefill"
    assert few.output_tokens_per_s == pytest.approx(few.rate_per_s * REQUEST.output_tokens)
    # a pool's rate scales with its workers: each worker is a replica of its own
    assert _rate(4, 2).decode_rate_per_s == pytest.approx(2 * few.decode_rate_per_s, rel=1e-9)


def test_the_prefill_pools_rate_is_a_one_token_server_within_the_ttft_target_less_the_transfer():
    d = _deployment(2, 6)
    transfer = d.transfer_one_s(REQUEST.input_tokens)
    found = _rate(2, 6)
    one = Request(1024.0, 1.0)
    alone = max_rate(
        MODEL, d.prefill, one, ttft_target_s=1.0 - transfer, tpot_target_s=math.inf, engine=ENGINE, percentile=None
    )
    assert found.prefill_rate_per_s == pytest.approx(alone.request_rate_per_s, rel=1e-9)
    at = disaggregated_server(
        MODEL, d.prefill, d.decode, REQUEST, 10.0, transfer_s=transfer, prefill_engine=ENGINE, decode_engine=ENGINE
    )
    assert at.ttft_s == pytest.approx(estimate_server(MODEL, d.prefill, one, 10.0, engine=ENGINE).ttft_s + transfer)


def test_a_decode_bound_rate_is_littles_law_at_the_largest_batch_meeting_the_tpot_target():
    found = _rate(4, 1, tpot_target_s=0.012)
    assert found.bound == "decode" and found.decode_limited_by == "tpot target"
    d = _deployment(4, 1)
    batches = np.array([found.decode_batch, found.decode_batch + 1.0, found.decode_batch + 3.0])
    engine = deployment_profile(ENGINE, MODEL, d.decode, REQUEST)
    steps = request_steps(
        MODEL, d.decode, REQUEST, batches, 0.0, REQUEST.decode_context_tokens, default_calibration(), engine
    ).step_s
    assert found.tpot_s == pytest.approx(steps[1], rel=1e-3) and found.tpot_s <= 0.012
    assert steps[2] > 0.012  # two sequences more and the target is missed
    per_worker = found.decode_batch / ((REQUEST.output_tokens - 1.0) * steps[0])
    assert found.decode_rate_per_s == pytest.approx(per_worker * d.decode.dp, rel=1e-3)


def test_the_closed_forms_tpot_meets_the_disaggregated_simulators():
    d = _deployment(2, 6)
    transfer = d.transfer_one_s(REQUEST.input_tokens)
    for rate in (8.0, 16.0):
        closed = disaggregated_server(
            MODEL, d.prefill, d.decode, REQUEST, rate, transfer_s=transfer, prefill_engine=ENGINE, decode_engine=ENGINE
        )
        simulated = simulate_disaggregated(MODEL, d, REQUEST, Load(rate_per_s=rate), requests=3000, engine=ENGINE)
        assert closed.tpot_s == pytest.approx(simulated.to_json()["tpot_s"]["mean"], rel=0.03)


def test_rates_and_targets_out_of_reach_are_refused_in_one_line():
    d = _deployment(4, 1)
    transfer = d.transfer_one_s(REQUEST.input_tokens)
    with pytest.raises(ClusterSimError, match=r"^prefill pool: rate: 10000 requests/s exceeds the saturation rate"):
        disaggregated_server(
            MODEL, d.prefill, d.decode, REQUEST, 1e4, transfer_s=transfer, prefill_engine=ENGINE, decode_engine=ENGINE
        )
    wide = _deployment(7, 1)  # prefill to spare: the one decode worker saturates first
    with pytest.raises(ClusterSimError, match="exceeds the decode pool's saturation rate"):
        disaggregated_server(
            MODEL, wide.prefill, wide.decode, REQUEST, 100.0, transfer_s=transfer, prefill_engine=ENGINE,
            decode_engine=ENGINE,
        )  # fmt: skip
    with pytest.raises(ClusterSimError, match="leaves nothing for the prompt"):
        disaggregated_max_rate(
            MODEL, d.prefill, d.decode, REQUEST, transfer_s=0.5, ttft_target_s=0.4, tpot_target_s=0.05,
            prefill_engine=ENGINE, decode_engine=ENGINE,
        )  # fmt: skip
    with pytest.raises(ClusterSimError, match="lone sequence takes"):
        _rate(4, 1, tpot_target_s=1e-4)


def _rack_case() -> dict:
    with (project_dir() / "inference.jsonl").open() as lines:
        return next(c for c in map(json.loads, lines) if c["id"] == "mlperf60_llama2-70b_72xgb200_server_disaggregated")


def test_a_disaggregated_case_is_scored_by_its_pools_and_held_out_of_the_fit():
    case = _rack_case()
    pools = case["parallel"]["disaggregate"]
    assert (pools["prefill"]["workers"], pools["decode"]["workers"]) == (28, 44)
    assert not fits_reference_calibration(case)
    served = predict_inference_case(case, "output_tokens_per_s", CATALOG)
    # measured 810,104 tokens/s at the submitter's rate; the decode pool's 44 workers at their cap of 1,024 each
    assert 0.5 * case["measured"]["output_tokens_per_s"] < served < 1.2 * case["measured"]["output_tokens_per_s"]
    aggregated = dict(case, parallel={k: v for k, v in case["parallel"].items() if k != "disaggregate"})
    assert predict_inference_case(aggregated, "output_tokens_per_s", CATALOG) != pytest.approx(served)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"workload": {"scenario": "offline", "dataset": "openorca", "output_tokens": 271.6}},
            "not scenario 'offline'",
        ),
        ({"system": {"accelerator": "gb200", "devices": 64, "devices_per_node": 4}}, "pools hold 72 devices"),
    ],
)
def test_a_disaggregated_case_the_closed_form_cannot_price_is_refused(change: dict, message: str):
    case = dict(_rack_case(), **change)
    with pytest.raises(ClusterSimError, match=message):
        predict_inference_case(case, "output_tokens_per_s", CATALOG)
