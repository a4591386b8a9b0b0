"""The request simulator's refusals of a load and of a run's options: each names its option as ``field`` (and the
offending ``value`` where it has one) in a one-line message, and the edge of each valid range is accepted."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clustersim.errors import ClusterSimError
from clustersim.serving.simulate import MAX_REQUESTS, Load, check_run
from clustersim.serving.traces import Trace

TRACE = Trace(np.array([0.0, 1.0]), np.array([100, 200]), np.array([10, 20]))


def _refusal(call: object, *args: object, **kwargs: object) -> ClusterSimError:
    with pytest.raises(ClusterSimError) as caught:
        call(*args, **kwargs)  # type: ignore[operator]
    return caught.value


@pytest.mark.parametrize(
    ("given", "named"),
    [({}, "none"), ({"rate_per_s": 1.0, "concurrency": 2}, "rate_per_s, concurrency")],
)
def test_a_load_needs_exactly_one_kind(given: dict[str, float], named: str) -> None:
    error = _refusal(Load, **given)
    assert str(error) == (
        f"load: give exactly one of a rate (--rate), a concurrency (--concurrency) or a trace (--trace); got {named}"
    )
    assert error.field == "--rate"


@pytest.mark.parametrize("rate", [0.0, -1.0, math.inf, math.nan])
def test_a_rate_must_be_positive_and_finite(rate: float) -> None:
    error = _refusal(Load, rate_per_s=rate)
    assert str(error) == f"--rate: must be positive requests/s, got {rate}"
    assert error.field == "--rate"


def test_the_smallest_load_of_each_kind_is_accepted() -> None:
    assert Load(rate_per_s=1e-9).kind == "poisson"
    assert Load(concurrency=1).kind == "closed_loop"
    assert Load(concurrency=1, ramp_up_s=0.0).ramp_up_s == 0.0


def test_a_closed_loop_needs_a_client() -> None:
    error = _refusal(Load, concurrency=0)
    assert str(error) == "--concurrency: must be at least 1 client, got 0"
    assert error.field == "--concurrency"


@pytest.mark.parametrize("ramp", [-1.0, math.nan])
def test_a_ramp_up_is_never_negative(ramp: float) -> None:
    error = _refusal(Load, concurrency=4, ramp_up_s=ramp)
    assert str(error) == f"ramp_up_s: must be >= 0 s, got {ramp}"
    assert error.field == "ramp_up_s"


def _check(
    load: Load,
    *,
    requests: int = 10,
    hit: float = 0.0,
    max_batch: int | None = None,
    kv_tokens: float | None = None,
    **routing: str,
) -> None:
    """``check_run`` with every option valid unless given (``routing`` only where given: its default is tested)."""
    check_run(None, requests, hit, max_batch, kv_tokens, load, **routing)  # type: ignore[arg-type]


def test_a_closed_loop_runs_with_the_default_routing() -> None:
    _check(Load(concurrency=4))  # random routing, the default, is what a closed loop does
    _check(Load(rate_per_s=2.0), routing="cache-aware")


def test_a_closed_loop_is_not_routed() -> None:
    error = _refusal(_check, Load(concurrency=4), routing="cache-aware")
    assert str(error) == (
        "--routing cache-aware: a closed loop's clients each keep to one replica; route an open loop (--rate or "
        "--trace)"
    )
    assert (error.field, error.value) == ("--routing", "cache-aware")


@pytest.mark.parametrize("requests", [0, MAX_REQUESTS + 1])
def test_requests_outside_their_range_are_refused(requests: int) -> None:
    error = _refusal(_check, Load(rate_per_s=1.0), requests=requests)
    assert str(error) == f"--requests: must be 1..{MAX_REQUESTS:,}, got {requests}"
    assert error.field == "--requests"


def test_the_request_range_is_inclusive_and_a_trace_brings_its_own() -> None:
    _check(Load(rate_per_s=1.0), requests=1)
    _check(Load(rate_per_s=1.0), requests=MAX_REQUESTS)
    _check(Load(trace=TRACE), requests=0)  # a trace's requests are its own, the option unread


@pytest.mark.parametrize("hit", [-0.1, 1.0])
def test_a_prefix_hit_rate_is_a_fraction_below_one(hit: float) -> None:
    error = _refusal(_check, Load(rate_per_s=1.0), hit=hit)
    assert str(error) == f"--prefix-hit: a prefix cache hit rate is a fraction of each prompt in [0, 1), got {hit}"
    assert (error.field, error.value) == ("--prefix-hit", hit)


def test_a_batch_holds_a_sequence() -> None:
    error = _refusal(_check, Load(rate_per_s=1.0), max_batch=0)
    assert str(error) == "--batch: must be at least 1 sequence, got 0"
    assert error.field == "--batch"
    _check(Load(rate_per_s=1.0), max_batch=1)


@pytest.mark.parametrize("tokens", [0.0, -5.0, math.nan])
def test_a_kv_capacity_is_positive(tokens: float) -> None:
    error = _refusal(_check, Load(rate_per_s=1.0), kv_tokens=tokens)
    assert str(error) == f"kv_capacity_tokens: must be positive, got {tokens}"
    assert error.field == "kv_capacity_tokens"
    _check(Load(rate_per_s=1.0), kv_tokens=0.5)  # any room at all is a capacity; what fits it is the run's to say
