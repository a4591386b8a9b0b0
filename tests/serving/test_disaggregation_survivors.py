"""The disaggregated server's closed form where mutation testing of ``serving.disaggregation`` and
``serving.disaggregated_rate`` found it unpinned: every pool priced on the calibration and engine it is given, the
decode pool's caps over its attention-DP groups, the targets' edges, the rate a latency is asked at, and the
refusals' fields."""

from __future__ import annotations

import dataclasses
import math

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.disaggregated_rate import _decode_curve, disaggregated_max_rate, disaggregated_server
from clustersim.serving.disaggregation import Pools, deploy, parse_pools
from clustersim.serving.engine import default_calibration, serving_system_for_instance
from clustersim.serving.estimate import Request
from clustersim.workload.zoo import load_model
from tests.serving.test_serving_queues_survivors import _twice_as_slow

CATALOG = load_catalog(use_env=False)
MODEL = load_model("llama3.1-8b", use_env=False)
REQUEST = Request(1024.0, 256.0)


def _deployment(prefill: int = 2, decode: int = 6):
    return deploy(CATALOG, "p5.48xlarge", Pools(prefill, decode), 1, MODEL, REQUEST.kv)


def _max_rate(**kw: object):
    d = _deployment()
    args = {"transfer_s": d.transfer_one_s(REQUEST.input_tokens), "ttft_target_s": 1.0, "tpot_target_s": 0.02}
    return disaggregated_max_rate(MODEL, d.prefill, d.decode, REQUEST, **(args | kw))  # type: ignore[arg-type]


@pytest.mark.parametrize("tpot_target_s", [0.02, 0.2])
def test_a_deployment_twice_as_slow_serves_half_the_rate_at_twice_the_latency(tpot_target_s: float) -> None:
    """Every step twice as long, the targets and the transfer too: the same batches at half the rate."""
    fast = _max_rate(tpot_target_s=tpot_target_s, prefill_engine="vllm", decode_engine="vllm")
    d = _deployment()
    slow = disaggregated_max_rate(
        MODEL, d.prefill, d.decode, REQUEST, transfer_s=2 * d.transfer_one_s(REQUEST.input_tokens), ttft_target_s=2.0,
        tpot_target_s=2 * tpot_target_s, prefill_engine="vllm", decode_engine="vllm",
        cal=_twice_as_slow(default_calibration()),
    )  # fmt: skip
    assert slow.rate_per_s == pytest.approx(fast.rate_per_s / 2, rel=1e-6)
    assert slow.prefill_rate_per_s == pytest.approx(fast.prefill_rate_per_s / 2, rel=1e-6)
    assert slow.decode_rate_per_s == pytest.approx(fast.decode_rate_per_s / 2, rel=1e-6)
    assert (slow.ttft_s, slow.tpot_s) == (pytest.approx(2 * fast.ttft_s, rel=1e-6), pytest.approx(2 * fast.tpot_s))
    assert (slow.decode_batch, slow.decode_max_batch, slow.bound) == (
        pytest.approx(fast.decode_batch, rel=1e-6), fast.decode_max_batch, fast.bound
    )  # fmt: skip
    assert slow.transfer_s == 2 * d.transfer_one_s(REQUEST.input_tokens)
    at = disaggregated_server(
        MODEL, d.prefill, d.decode, REQUEST, slow.rate_per_s, transfer_s=slow.transfer_s, prefill_engine="vllm",
        decode_engine="vllm", cal=_twice_as_slow(default_calibration()),
    )  # fmt: skip
    assert (at.ttft_s, at.tpot_s, at.decode_batch) == (
        pytest.approx(slow.ttft_s), pytest.approx(slow.tpot_s), pytest.approx(slow.decode_batch)
    )  # fmt: skip


def test_each_pool_runs_on_the_engine_it_is_given() -> None:
    """SGLang's eager prompt steps lengthen the prefill pool's TTFT; vLLM's A100 sequence cap bounds its decode pool."""
    trt = _max_rate(prefill_engine="tensorrt-llm", decode_engine="tensorrt-llm")
    sglang = _max_rate(prefill_engine="sglang", decode_engine="tensorrt-llm")
    assert sglang.prefill_rate_per_s < trt.prefill_rate_per_s
    d = _deployment()
    at = {
        engine: disaggregated_server(
            MODEL,
            d.prefill,
            d.decode,
            REQUEST,
            5.0,
            transfer_s=0.0,
            prefill_engine=engine,
            decode_engine="tensorrt-llm",
        )
        for engine in ("tensorrt-llm", "sglang")
    }
    assert at["sglang"].ttft_s > 1.2 * at["tensorrt-llm"].ttft_s
    a100 = deploy(CATALOG, "p4de.24xlarge", Pools(1, 1), 4, MODEL, REQUEST.kv)
    short = Request(128.0, 128.0)
    caps = {
        engine: disaggregated_max_rate(
            MODEL,
            a100.prefill,
            a100.decode,
            short,
            transfer_s=0.0,
            ttft_target_s=10.0,
            tpot_target_s=10.0,
            prefill_engine="tensorrt-llm",
            decode_engine=engine,
        )
        for engine in ("vllm", "tensorrt-llm")
    }
    assert (caps["vllm"].decode_max_batch, caps["vllm"].decode_limited_by) == (256, "scheduler")
    assert caps["tensorrt-llm"].decode_max_batch > 256


def test_a_decode_pool_with_attention_data_parallel_holds_each_groups_sequences() -> None:
    """Eight attention-DP groups of one GPU each: eight times one group's cap (vLLM's 1,024 sequences on a B200)."""
    moe = load_model("qwen3-30b-a3b", use_env=False)
    short = Request(128.0, 128.0)
    pools = {
        groups: serving_system_for_instance(CATALOG, "p6-b200.48xlarge", tp=1, attention_dp=groups, dp=1)
        for groups in (1, 8)
    }
    found = {
        groups: disaggregated_max_rate(
            moe,
            pools[1],
            pool,
            short,
            transfer_s=0.0,
            ttft_target_s=10.0,
            tpot_target_s=10.0,
            prefill_engine="vllm",
            decode_engine="vllm",
        )
        for groups, pool in pools.items()
    }
    assert (found[1].decode_max_batch, found[1].decode_limited_by) == (1024, "scheduler")
    assert (found[8].decode_max_batch, found[8].decode_limited_by) == (8 * 1024, "scheduler")


def test_the_targets_edges() -> None:
    d = _deployment()
    transfer = d.transfer_one_s(REQUEST.input_tokens)
    with pytest.raises(ClusterSimError, match="leaves nothing for the prompt") as caught:
        _max_rate(ttft_target_s=transfer)
    assert (caught.value.field, caught.value.value) == ("ttft_target_s", transfer)
    assert _max_rate(tpot_target_s=10.0).decode_limited_by == "capacity"
    cap_step = _decode_curve(MODEL, d.decode, REQUEST, default_calibration(), None).seen_s[-1]
    exactly = _max_rate(tpot_target_s=float(cap_step))  # a step at the cap exactly at the target meets it
    assert exactly.decode_limited_by == "capacity" and exactly.decode_max_batch == 377
    with pytest.raises(ClusterSimError, match="lone sequence takes") as caught:
        _max_rate(tpot_target_s=1e-6)
    assert (caught.value.field, caught.value.value) == ("tpot_target_s", 1e-6)


def test_a_latency_is_asked_at_a_positive_rate_below_the_decode_pools_saturation() -> None:
    d = _deployment()
    found = _max_rate(tpot_target_s=10.0)
    for rate in (0.0, -1.0):
        with pytest.raises(ClusterSimError, match=r"^rate: must be positive") as caught:
            disaggregated_server(MODEL, d.prefill, d.decode, REQUEST, rate, transfer_s=0.0)
        assert (caught.value.field, caught.value.value) == ("rate", rate)
    slow = disaggregated_server(MODEL, d.prefill, d.decode, REQUEST, 0.5, transfer_s=0.0)
    assert slow.rate_per_s == 0.5 and slow.decode_batch > 0 and slow.tpot_s > 0
    lean = _deployment(6, 1)  # one decode worker: it saturates long before six prefill workers do
    saturated = disaggregated_max_rate(
        MODEL, lean.prefill, lean.decode, REQUEST, transfer_s=0.0, ttft_target_s=10.0, tpot_target_s=10.0
    ).decode_rate_per_s  # at a loose target, the rate at the decode worker's cap
    at = disaggregated_server(MODEL, lean.prefill, lean.decode, REQUEST, saturated, transfer_s=0.0)
    assert at.decode_batch == pytest.approx(found.decode_max_batch)
    with pytest.raises(
        ClusterSimError, match=r"^rate: [0-9.]+ requests/s exceeds the decode pool's saturation"
    ) as caught:
        disaggregated_server(MODEL, lean.prefill, lean.decode, REQUEST, 1.5 * saturated, transfer_s=0.0)
    assert caught.value.field == "rate"
    assert f"saturation rate of {saturated:.3g} requests/s (377 sequences a worker, its capacity)" in str(caught.value)
    one = disaggregated_server(MODEL, d.prefill, d.decode, dataclasses.replace(REQUEST, output_tokens=1.0), 1.0,
                               transfer_s=0.0)  # fmt: skip
    assert (one.decode_batch, one.tpot_s) == (0.0, 0.0)


def test_pools_read_and_refused_naming_the_flag() -> None:
    assert parse_pools("2x4:3x2") == Pools(2, 3, 4, 2) and parse_pools(" 1 : 1 ") == Pools(1, 1)
    for text, what in (("0:1", "prefill workers"), ("1:0", "decode workers"), ("1x0:1", "prefill tp"),
                       ("1:1x0", "decode tp")):  # fmt: skip
        with pytest.raises(ClusterSimError, match=rf"^--disaggregate: {what} must be at least 1") as caught:
            parse_pools(text)
        assert caught.value.field == "--disaggregate"


def test_a_deployment_across_instances_counts_each_pools_instances() -> None:
    """Two prefill workers of tp 4 and three decode workers of tp 2 on 8-GPU p5s: one instance for the prefill
    pool, one for the decode pool (6 of its 8 GPUs); the KV cache crosses the network."""
    across = deploy(CATALOG, "p5.48xlarge", Pools(2, 3, 4, 2), 1, MODEL, REQUEST.kv)
    assert (across.instances, across.over_network) == (2, True)
    assert (across.prefill.tp, across.prefill.pp, across.decode.tp, across.decode.pp) == (4, 1, 2, 1)
    assert across.link.startswith("network between ")
    inside = _deployment(2, 6)
    assert (inside.instances, inside.over_network, inside.link) == (
        1,
        False,
        f"{inside.fabric.scaleup_link} in one node",
    )
    wide = deploy(CATALOG, "p5.48xlarge", Pools(3, 5, 3, 3), 1, MODEL, REQUEST.kv)
    assert wide.instances == 2 + 3 and wide.to_json()["instances"] == 5  # two tp-3 workers an instance
    with pytest.raises(ClusterSimError, match="a decode worker's tp 16 does not fit the 8 devices") as caught:
        deploy(CATALOG, "p5.48xlarge", Pools(1, 1, 1, 16), 1, MODEL, REQUEST.kv)
    assert (caught.value.field, caught.value.value) == ("--disaggregate", 16)
    assert math.isclose(across.transfer_one_s(1024.0), float(across.transfer_s([1024.0])[0]))


def test_the_decode_pools_capacity_is_its_calibrations_and_engines_room() -> None:
    """40 GiB more workspace a device leaves less room for the KV cache: a capacity-bound decode pool holds fewer
    sequences on that calibration, and on vLLM (its own share of the device) another count than TensorRT-LLM's."""
    cal = default_calibration()
    roomy = dataclasses.replace(cal, workspace_bytes=cal.workspace_bytes + 40 * 2**30)
    held = _max_rate(tpot_target_s=10.0)
    squeezed = _max_rate(tpot_target_s=10.0, cal=roomy)
    assert held.decode_limited_by == squeezed.decode_limited_by == "capacity"
    assert squeezed.decode_max_batch < 0.7 * held.decode_max_batch
    on_vllm = _max_rate(tpot_target_s=10.0, decode_engine="vllm")
    assert on_vllm.decode_limited_by == "capacity" and on_vllm.decode_max_batch != held.decode_max_batch
