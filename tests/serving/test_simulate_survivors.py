"""Tests that kill what mutation testing of ``serving_simulate`` (the request simulator's driver and its
disaggregated form, benchmarks/mutation.py) left alive."""

from __future__ import annotations

from clustersim.serving.estimate import Request
from clustersim.serving.sim_disaggregated import simulate_disaggregated
from clustersim.serving.simulate import Load
from tests.serving.test_disaggregation import model, pools


def test_a_disaggregated_run_reports_progress_every_hundred_requests_of_each_pool_and_at_the_end():
    """Progress over both pools: the prefill pool's first half (its 100th, 200th and last request), then the
    decode pool's second (the same), as ``(done, total)`` with total the run's 250 requests."""
    calls: list[tuple[int, int]] = []
    simulate_disaggregated(
        model("llama3.1-8b"), pools("1:2"), Request(512, 64), Load(rate_per_s=20.0), requests=250, seed=1,
        progress=lambda done, total: calls.append((done, total)),
    )  # fmt: skip
    assert calls == [(50, 250), (100, 250), (125, 250), (175, 250), (225, 250), (250, 250)]
