"""What a simulated run reports, counted by hand on three requests: each request's TTFT, end-to-end latency and
mean inter-token latency, the pooled ITL weighted by tokens (a preempted request's long gap among them), the
throughput over the span from the first arrival to the last token, goodput under each kind of SLO bound, and runs
over seeds merged into medians and ranges."""

from __future__ import annotations

import numpy as np
import pytest

from clustersim.errors import ClusterSimError
from clustersim.serving.rate_grid import MAX_RATES, parse_rates
from clustersim.serving.sim_report import SimulationResult, Slo, over_seeds, parse_slo, percentiles
from clustersim.units import MAX_RATE_PER_S


def _run(slo: Slo | None = None) -> SimulationResult:
    """Arrivals at 0, 1 and 2 s; first tokens at 0.5, 1.25 and 4 s; last tokens at 2.5, 3.25 and 4 s. The third
    request makes one token; the second was preempted once (a 1 s gap)."""
    return SimulationResult(
        arrival_s=np.array([0.0, 1.0, 2.0]),
        first_token_s=np.array([0.5, 1.25, 4.0]),
        finish_s=np.array([2.5, 3.25, 4.0]),
        input_tokens=np.array([100, 300, 200]),
        output_tokens=np.array([5, 9, 1]),
        preemptions=np.array([0, 1, 0]),
        step_s=np.array([0.1, 0.3, 0.2]),
        step_tokens=np.array([2, 1, 0]),
        resume_gaps_s=np.array([1.0]),
        steps=7,
        wall_s=0.01,
        slo=slo,
        setup={"model": "m"},
    )


def test_each_requests_latencies_are_counted_from_its_own_arrival():
    run = _run()
    assert run.ttft_s.tolist() == [0.5, 0.25, 2.0]
    assert run.e2e_s.tolist() == [2.5, 2.25, 2.0]
    assert run.request_itl_s.tolist() == [0.5, 0.25, 0.0]  # (2.5 - 0.5) / 4, (3.25 - 1.25) / 8; one token: 0
    assert run.duration_s == 4.0  # the first arrival (0 s) to the last token (4 s)


def test_the_summary_counts_throughput_over_the_span_and_pools_the_gaps_by_tokens():
    summary = _run().to_json()
    assert summary["model"] == "m" and summary["requests"] == 3
    assert summary["input_tokens"] == {"mean": 200.0, "max": 300}
    assert summary["output_tokens"] == {"mean": 5.0, "max": 9}
    assert summary["throughput"] == {
        "output_tokens_per_s": 15 / 4.0,
        "input_tokens_per_s": 600 / 4.0,
        "requests_per_s": 3 / 4.0,
    }
    # the mean ITL per request leaves out the one-token request: the mean of 0.5 and 0.25
    assert summary["tpot_s"]["mean"] == pytest.approx(0.375) and summary["tpot_s"]["p50"] == pytest.approx(0.375)
    # pooled ITL: 0.1 s twice, 0.3 s once, the 1 s resume gap once (the step that made no token counts none)
    assert summary["itl_s"] == pytest.approx(percentiles(np.array([0.1, 0.1, 0.3, 1.0])))
    assert summary["itl_s"]["mean"] == pytest.approx(1.5 / 4)
    assert summary["ttft_s"]["p50"] == 0.5 and summary["e2e_s"]["mean"] == pytest.approx(6.75 / 3)
    assert (summary["preemptions"], summary["preempted_requests"], summary["steps"]) == (1, 1, 7)
    assert (summary["duration_s"], summary["sim_wall_s"], summary["slo"], summary["goodput"]) == (4.0, 0.01, None, None)


@pytest.mark.parametrize(
    ("slo", "good"),
    [
        (Slo(ttft_s=0.5), [True, True, False]),  # a bound is met at equality
        (Slo(ttft_s=0.49), [False, True, False]),
        (Slo(itl_s=0.25), [False, True, True]),  # the one-token request has no gap to miss
        (Slo(e2e_s=2.25), [False, True, True]),
        (Slo(ttft_s=1.0, e2e_s=2.4), [False, True, False]),  # every bound must hold
    ],
)
def test_goodput_counts_the_requests_meeting_every_bound(slo, good):
    run = _run(slo)
    assert run.good().tolist() == good
    summary = run.to_json()
    assert summary["goodput"] == {"requests_per_s": sum(good) / 4.0, "fraction": pytest.approx(sum(good) / 3)}
    assert summary["slo"] == slo.to_json()


def test_weighted_percentiles_interpolate_between_ranks_of_the_tokens():
    """Values 1 and 3 weighing 1 and 3 tokens are 1, 3, 3, 3: ranks 0..3, p50 at rank 1.5 is 3; 2 and 4 of one token
    each: p50 halfway, 3, p90 at rank 0.9, 3.8."""
    found = percentiles(np.array([3.0, 1.0]), np.array([3.0, 1.0]))
    assert (found["p50"], found["mean"]) == (3.0, 2.5)
    pair = percentiles(np.array([4.0, 2.0]), np.array([1.0, 1.0]))
    assert (pair["p50"], pair["p90"], pair["p99"]) == pytest.approx((3.0, 3.8, 3.98))


def test_runs_over_seeds_take_the_median_of_their_counts_and_the_median_prefix_share():
    def run(preempted: int, share: float, goodput: float) -> dict:
        figures = {"p50": goodput, "mean": goodput}
        return {
            **{group: figures for group in ("input_tokens", "output_tokens", "ttft_s", "itl_s", "tpot_s", "e2e_s")},
            "throughput": figures,
            "goodput": {"requests_per_s": goodput, "fraction": goodput},
            "preemptions": 2 * preempted,
            "preempted_requests": preempted,
            "duration_s": 10.0 + preempted,
            "steps": 100,
            "sim_wall_s": 1.0,
            "prefix_cache": {"hit_rate": 0.5, "cached_share": share},
        }

    merged = over_seeds([run(1, 0.2, 0.9), run(5, 0.4, 0.7), run(3, 0.3, 0.8)], [1, 2, 3])
    assert (merged["preemptions"], merged["preempted_requests"], merged["duration_s"]) == (6.0, 3.0, 13.0)
    assert merged["prefix_cache"] == {"hit_rate": 0.5, "cached_share": 0.3}
    assert merged["goodput"] == {"requests_per_s": 0.8, "fraction": 0.8}
    assert merged["spread"]["goodput"]["fraction"] == [0.7, 0.9]
    assert (merged["steps"], merged["sim_wall_s"]) == (300, 3.0)


@pytest.mark.parametrize("text", [" , ", "ttf=2s", "ttft=2parsecs", "ttft=0s", "itl=50ms,tpot=40ms"])
def test_a_bad_slo_carries_the_whole_text_it_was_given(text):
    with pytest.raises(ClusterSimError) as found:
        parse_slo(text, "slo")
    assert (found.value.field, found.value.value) == ("slo", text)


def test_slo_names_are_read_in_any_case():
    assert parse_slo("TTFT=2s,Tpot=40ms") == Slo(ttft_s=2.0, itl_s=0.04)


@pytest.mark.parametrize("text", ["1:x", "8:2", "0,1", "1"])
def test_a_bad_rate_grid_carries_the_whole_text_it_was_given(text):
    with pytest.raises(ClusterSimError) as found:
        parse_rates(text)
    assert (found.value.field, found.value.value) == ("--rates", text)


def test_a_rate_grid_holds_the_largest_rate_and_as_many_rates_as_allowed():
    assert parse_rates(f"1,{MAX_RATE_PER_S}") == [1.0, MAX_RATE_PER_S]
    assert len(parse_rates(f"1:{MAX_RATES}:1")) == MAX_RATES
    with pytest.raises(ClusterSimError, match=r"'1:2:3:4' is not a range or a list; use A:B"):
        parse_rates("1:2:3:4")


def test_a_two_token_request_has_one_gap_and_the_span_starts_at_the_first_arrival():
    """Arrivals at 1 and 2 s; two tokens at 1.5 and 1.9 s, three at 2.5, 2.7 and 2.9 s: mean gaps 0.4 and 0.2 s; the
    span 1 to 2.9 s. An SLO of TTFT 0.49 s and ITL 1 s: the first request meets the ITL bound but not the TTFT one."""
    run = SimulationResult(
        arrival_s=np.array([1.0, 2.0]),
        first_token_s=np.array([1.5, 2.5]),
        finish_s=np.array([1.9, 2.9]),
        input_tokens=np.array([10, 10]),
        output_tokens=np.array([2, 3]),
        preemptions=np.array([0, 0]),
        step_s=np.array([0.2]),
        step_tokens=np.array([1]),
        resume_gaps_s=np.array([]),
        steps=3,
        wall_s=0.0,
        slo=Slo(ttft_s=0.49, itl_s=1.0),
    )
    assert run.request_itl_s == pytest.approx([0.4, 0.2])
    assert run.duration_s == pytest.approx(1.9)
    assert run.good().tolist() == [False, False]  # the second's TTFT is 0.5 s
    assert run.to_json()["tpot_s"]["mean"] == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("text", "why"), [(",", "names no rate"), (",".join(str(r) for r in range(1, 66)), "names 65 rates, more than 64")]
)
def test_a_rate_list_with_none_or_too_many_is_refused(text, why):
    with pytest.raises(ClusterSimError, match=f"{why}; use A:B"):
        parse_rates(text)
