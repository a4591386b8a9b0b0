"""Disaggregated prefill and decode in the request simulator: the pools, the KV transfer and its price, what
it does to TTFT and inter-token latency, and what it refuses."""

import dataclasses
import functools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.choices import Batching
from clustersim.errors import ClusterSimError
from clustersim.network.fabric import Fabric
from clustersim.serving.disaggregation import Pools, deploy, parse_pools
from clustersim.serving.engine import serving_system_for_instance
from clustersim.serving.estimate import Request
from clustersim.serving.sim_disaggregated import simulate_disaggregated
from clustersim.serving.simulate import Load, simulate
from clustersim.workload.zoo import load_model

MIB = 2**20


@functools.cache
def catalog():
    return load_catalog(use_env=False)


@functools.cache
def model(name: str):
    return load_model(name, use_env=False)


def pools(text: str, tp: int = 2, name: str = "llama3.1-8b", instance: str = "p5.48xlarge"):
    return deploy(catalog(), instance, parse_pools(text), tp, model(name), Request(1, 1).kv)


# ---- the pools --------------------------------------------------------------------------------------------------


def test_pools_read_both_forms():
    assert parse_pools("1:3") == Pools(1, 3, None, None)
    assert parse_pools(" 2x4 : 1x8 ") == Pools(2, 1, 4, 8)
    assert parse_pools("1x4:2") == Pools(1, 2, 4, None)


@pytest.mark.parametrize("text", ["1", "a:b", "1:2:3", "0:1", "1x0:1", "1:-2"])
def test_a_bad_pool_text_is_one_error_naming_the_option(text):
    with pytest.raises(ClusterSimError, match="--disaggregate") as caught:
        parse_pools(text)
    assert caught.value.field == "--disaggregate" and "P:D" in str(caught.value)


def test_pools_that_fit_one_instance_share_its_nvlink_else_each_has_its_own():
    inside = pools("1:1")  # 2 + 2 devices of 8
    assert inside.instances == 1 and not inside.over_network and "NVLink" in inside.link
    apart = pools("1x4:2x4")  # 12 devices
    assert apart.instances == 2 and apart.over_network and apart.fabric.num_nodes == 2
    assert (apart.prefill.tp, apart.prefill.dp, apart.decode.tp, apart.decode.dp) == (4, 1, 4, 2)
    # the same bytes go slower over one device's network share (p5: 3,200 Gb/s over 8 GPUs) than over NVLink
    assert apart.transfer_s([4096.0])[0] > 3 * pools("1x4:1x4").transfer_s([4096.0])[0]


def test_a_worker_wider_than_an_instance_is_refused():
    with pytest.raises(ClusterSimError, match="tp 16 does not fit the 8 devices") as caught:
        pools("1x16:1", tp=2)
    assert caught.value.field == "--disaggregate"


# ---- the KV transfer --------------------------------------------------------------------------------------------


def test_the_kv_cache_of_opt_175b_is_distserves_and_so_is_its_transfer():
    """DistServe's blog (https://hao-ai-lab.github.io/blogs/distserve/): OPT-175B holds 4.5 MB of KV cache a token,
    and a 2048-token request moves over 8 PCIe links of 64 GB/s in about 17.6 ms. GPT-3 175B has OPT-175B's shape
    (96 layers, hidden 12288). Our price applies NCCL's achieved fraction of the link and its latency, so it is
    that time or somewhat more."""
    found = pools("1x8:1x8", tp=8, name="gpt3-175b", instance="p4d.24xlarge")
    assert float(found.request_bytes(1.0)) == pytest.approx(4.5 * MIB, rel=1e-9)  # fp16 K and V, 96 x 12288
    assert float(found.link_bytes(2048.0)) == pytest.approx(2048 * 4.5 * MIB / 8, rel=1e-9)
    pcie = Fabric("pcie gen4", 8, 1, scaleup_bytes_per_s=64e9, network_bytes_per_s=0.0, in_network_reduction=False)
    seconds = float(dataclasses.replace(found, fabric=pcie).transfer_s([2048.0])[0])
    assert 0.0176 * 0.95 < seconds < 0.0176 / 0.6


@given(st.floats(1.0, 100_000.0), st.floats(1.0, 100_000.0))
def test_a_longer_prompt_moves_more_and_takes_longer(short, extra):
    found = pools("1:1")
    a, b = found.transfer_s([short, short + extra])
    assert found.request_bytes(short + extra) > found.request_bytes(short) and b >= a > 0


# ---- the simulation ---------------------------------------------------------------------------------------------

HEAVY = Request(4096, 256)  # long prompts: colocated decoders share their steps with prefill chunks


def test_decode_itl_improves_when_prefill_is_heavy_at_the_same_load_and_devices():
    """Four H100s each way at 6 requests/s of 4096-token prompts: colocated (2 replicas of tp 2) every long
    prompt's chunks stall the decoders (p99 ITL ~70 ms); split 1 prefill + 1 decode worker of tp 2, the decode
    pool runs decode steps only (p99 ITL ~5 ms), the TTFT paying for one prefill worker and the transfer."""
    load = Load(rate_per_s=6.0)
    colocated = simulate(model("llama3.1-8b"), serving_system_for_instance(catalog(), "p5.48xlarge", tp=2, dp=2),
                         HEAVY, load, requests=600).to_json()  # fmt: skip
    split = simulate_disaggregated(model("llama3.1-8b"), pools("1:1"), HEAVY, load, requests=600).to_json()
    assert split["itl_s"]["p99"] < colocated["itl_s"]["p99"] / 5
    assert split["itl_s"]["mean"] <= colocated["itl_s"]["mean"]
    assert split["tpot_s"]["p99"] <= colocated["tpot_s"]["p99"]
    assert split["throughput"]["output_tokens_per_s"] == pytest.approx(
        colocated["throughput"]["output_tokens_per_s"], rel=0.05
    )


def test_ttft_includes_the_transfer():
    """At a trickle (no queue) a request's TTFT is its prefill plus its KV transfer: over the network it is
    longer than over NVLink by the difference of the two transfers."""
    load = Load(rate_per_s=0.2)
    near, far = pools("1x2:1x2"), pools("4x2:1x2")  # 4 + 2 devices in one p5; 8 + 2 across two
    runs = [simulate_disaggregated(model("llama3.1-8b"), p, HEAVY, load, requests=40) for p in (near, far)]
    wire = [float(p.transfer_s([4096.0])[0]) for p in (near, far)]
    assert wire[1] > wire[0] > 0
    for run, seconds in zip(runs, wire, strict=True):
        info = run.setup["disaggregation"]
        assert info["kv_transfer_s"]["p50"] == pytest.approx(seconds)
        assert info["kv_bytes_per_request"]["mean"] == pytest.approx(4096 * 32 * 8 * 128 * 2 * 2)  # 8B's K and V
        assert np.all(run.ttft_s >= seconds)
    gap = float(np.median(runs[1].ttft_s) - np.median(runs[0].ttft_s))
    assert gap == pytest.approx(wire[1] - wire[0], rel=0.05)


def test_every_token_is_counted_once_and_latencies_are_ordered():
    result = simulate_disaggregated(model("llama3.1-8b"), pools("1:2"), Request(900, 120), Load(rate_per_s=20.0),
                                    requests=400, seed=3)  # fmt: skip
    assert np.all(result.first_token_s > result.arrival_s) and np.all(result.finish_s >= result.first_token_s)
    made = result.arrival_s.size + int(result.step_tokens.sum()) + result.resume_gaps_s.size
    assert made == int(result.output_tokens.sum()) == 400 * 120
    again = simulate_disaggregated(model("llama3.1-8b"), pools("1:2"), Request(900, 120), Load(rate_per_s=20.0),
                                   requests=400, seed=3)  # fmt: skip
    assert np.array_equal(again.finish_s, result.finish_s)


def test_a_one_token_request_ends_at_its_prefill_without_a_transfer():
    result = simulate_disaggregated(model("llama3.1-8b"), pools("1:1"), Request(512, 1), Load(rate_per_s=1.0),
                                    requests=20)  # fmt: skip
    assert np.array_equal(result.first_token_s, result.finish_s) and result.step_s.size == 0


@pytest.mark.parametrize(
    ("change", "words", "field"),
    [
        ({"load": Load(concurrency=4)}, "not a closed loop", "--concurrency"),
        ({"request": Request(512, 64, batching=Batching.STATIC)}, "continuous batching", "--batching"),
    ],
)
def test_what_the_pools_do_not_run_is_refused(change, words, field):
    args = {"load": Load(rate_per_s=1.0), "request": Request(512, 64)} | change
    with pytest.raises(ClusterSimError, match=words) as caught:
        simulate_disaggregated(model("llama3.1-8b"), pools("1:1"), args["request"], args["load"], requests=10)
    assert caught.value.field == field


def test_a_pool_that_cannot_hold_the_weights_is_refused_by_name():
    with pytest.raises(ClusterSimError, match="the prefill pool's workers \\(tp 1\\) cannot hold the model") as caught:
        simulate_disaggregated(model("llama2-70b"), pools("1x1:1x8", tp=8, name="llama2-70b"), Request(512, 64),
                               Load(rate_per_s=1.0), requests=10)  # fmt: skip
    assert caught.value.field == "--disaggregate"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 3),
    st.integers(1, 3),
    st.sampled_from([1, 2]),
    st.floats(0.5, 40.0),
    st.integers(1, 3000),
    st.integers(1, 300),
    st.integers(0, 2**16),
)
def test_any_disaggregated_run_serves_every_token_once_and_pays_each_transfer(p, d, tp, rate, n, o, seed):
    found = pools(f"{p}x{tp}:{d}x{tp}")
    result = simulate_disaggregated(model("llama3.1-8b"), found, Request(n, o), Load(rate_per_s=rate),
                                    requests=40, seed=seed)  # fmt: skip
    assert np.all(result.first_token_s > result.arrival_s) and np.all(result.finish_s >= result.first_token_s)
    made = result.arrival_s.size + int(result.step_tokens.sum()) + result.resume_gaps_s.size
    assert made == int(result.output_tokens.sum())
    if o > 1:  # each request's first token waits for its transfer after its prefill
        assert np.all(result.ttft_s >= float(found.transfer_s([float(n)])[0]))
        assert result.setup["disaggregation"]["kv_link_wait_s"]["p50"] >= 0
