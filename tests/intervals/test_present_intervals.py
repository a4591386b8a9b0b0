"""Reports with intervals: a figure with its range, the job's totals scaled with the step, the words."""

from __future__ import annotations

import math

import pytest
from rich.console import Console

from clustersim.catalog.registry import load_catalog
from clustersim.execution import Layout
from clustersim.intervals import Interval, Spread
from clustersim.present.intervals import span, with_range
from clustersim.present.training import estimate_json, estimate_view, training_intervals
from clustersim.system import system_for_instance
from clustersim.training.estimate import Estimate, estimate_training
from clustersim.training.job import TrainingJob
from clustersim.units import format_seconds
from clustersim.workload.zoo import load_model

SPREAD = Spread(-0.1, 0.1, 0.8, "training, hopper, megatron: 57 cases", 57, "")


def text(renderables: list[object]) -> str:
    console = Console(width=250, record=True)
    for r in renderables:
        console.print(r)
    return console.export_text()


@pytest.fixture(scope="module")
def estimate() -> Estimate:
    system = system_for_instance(load_catalog(use_env=False), "p5.48xlarge", 2)
    job = TrainingJob(global_batch=64, seq_len=8192, tokens=1e11)
    return estimate_training(load_model("llama3-8b"), system, Layout(tp=8, pp=1, dp=2, zero=1), job)


def test_a_range_writes_its_unit_once() -> None:
    interval = Interval(11.1, 13.9, 0.8)
    assert span(interval, lambda v: format_seconds(v, digits=3)) == "11.1-13.9 s"
    assert span(Interval(0.9, 1.2, 0.8), lambda v: format_seconds(v, digits=3)) == "900 ms-1.2 s"
    assert with_range("12.3 s", interval, lambda v: f"{v:.1f}") == "12.3 s (80%: 11.1-13.9)"
    assert with_range("12.3 s", None, str) == "12.3 s"
    assert span(Interval(0.373, 0.456, 0.8), lambda v: f"{100 * v:.1f}%") == "37.3-45.6%"


def test_every_headline_figure_has_its_interval(estimate: Estimate) -> None:
    found = training_intervals(estimate, SPREAD)
    assert set(found) == {"step_s", "tokens_per_s_per_device", "mfu", "time_s", "device_hours", "cost_usd",
                          "energy_kwh"}  # fmt: skip
    step = found["step_s"]
    assert step.low == pytest.approx(estimate.step_s * math.exp(-0.1))
    assert step.high == pytest.approx(estimate.step_s * math.exp(0.1))
    tokens = found["tokens_per_s_per_device"]  # a rate: the step's range inverted
    assert tokens.low == pytest.approx(estimate.tokens_per_s_per_device * math.exp(-0.1))
    assert estimate.totals is not None
    assert found["time_s"].high / estimate.totals.time_s == pytest.approx(step.high / estimate.step_s)
    payload = estimate_json(estimate, SPREAD)
    assert payload["intervals"]["step_s"] == step.to_json()
    assert set(payload["intervals"]) == {"step_s", "tokens_per_s_per_device", "mfu"}
    assert set(payload["job"]["intervals"]) == {"time_s", "device_hours", "cost_usd", "energy_kwh"}
    assert estimate_json(estimate, None) == estimate.to_json()


def test_the_text_shows_the_ranges_and_their_basis(estimate: Estimate) -> None:
    shown = text(estimate_view(estimate, 8_000_000_000, SPREAD))
    assert f"step {format_seconds(estimate.step_s)} (80%: " in shown
    assert "MFU " in shown and "%), HFU" in shown and "tokens/s per device (80%: " in shown
    assert "days (80%: " in shown
    assert (
        "80% intervals from left-out residuals of published training runs (training, hopper, megatron: 57 cases)"
        in shown
    )
    plain = text(estimate_view(estimate, 8_000_000_000))
    assert "80%" not in plain


def test_serving_latency_takes_its_own_spread_or_says_it_borrows_the_throughputs() -> None:
    from clustersim.present.serving import ServingSpreads, interval_lines, intervals_json, serving_intervals
    from clustersim.serving.engine import serving_system_for_instance
    from clustersim.serving.estimate import Request, estimate_offline

    system = serving_system_for_instance(load_catalog(use_env=False), "p5.48xlarge", tp=1)
    served = estimate_offline(load_model("llama3-8b"), system, Request(input_tokens=512, output_tokens=128))
    throughput = Spread(-0.1, 0.1, 0.8, "inference, hopper, tensorrt-llm: 40 cases", 40, "")
    ttft = Spread(-0.5, 0.3, 0.8, "inference TTFT, hopper, every stack: 30 cases", 30, "")
    spreads = ServingSpreads(throughput, {"ttft_s": ttft, "tpot_s": None})
    found = serving_intervals(served, spreads)
    assert found["ttft_s"].low == pytest.approx(served.ttft_s * math.exp(-0.5))  # its own residuals
    assert found["tpot_s"].high == pytest.approx(served.tpot_s * math.exp(0.1))  # the throughput's range
    assert found["output_tokens_per_s"].high == pytest.approx(served.output_tokens_per_s * math.exp(0.1))
    notes = intervals_json(served, spreads)["intervals"]
    assert notes["ttft_s"]["basis"].startswith("inference TTFT") and not notes["ttft_s"]["note"]
    assert "TPOT take the throughput's relative range" in notes["tpot_s"]["note"]
    lines = interval_lines(spreads)
    assert lines[1].startswith("80% intervals from left-out residuals of published TTFT (inference TTFT")
    assert lines[-1].startswith("TPOT take the throughput's relative range")
    assert interval_lines(ServingSpreads(throughput, {"ttft_s": ttft, "tpot_s": ttft}))[-1].startswith("80% interval")
