"""``diagnose.solve`` and ``FactorRange``: the factor search and the slope on functions whose answers are known."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.diagnose import FactorRange
from clustersim.diagnose.solve import RELATIVE_STEP, factor_for, sensitivity


@settings(max_examples=50, deadline=None)
@given(
    fixed=st.floats(min_value=0.0, max_value=10.0),
    scaled=st.floats(min_value=0.01, max_value=10.0),
    factor=st.floats(min_value=0.01, max_value=50.0),
)
def test_a_rate_factor_is_found_where_fixed_plus_scaled_over_f_meets_the_target(
    fixed: float, scaled: float, factor: float
) -> None:
    def step(f: float) -> float:
        return fixed + scaled / f

    found = factor_for(step, step(factor), 1e-3, 1e3)
    assert found is not None and math.isclose(step(found), step(factor), rel_tol=1e-8)
    # the factor to the step's tolerance over its slope (a flat step pins it less closely)
    assert math.isclose(found, factor, rel_tol=1e-3)


def test_a_target_out_of_reach_gives_no_factor() -> None:
    def step(f: float) -> float:
        return 2.0 + 1.0 / f  # never below 2 + 1e-3

    assert factor_for(step, 1.9, 1e-3, 1e3) is None
    assert factor_for(step, 2000.0, 1e-3, 1e3) is None  # more than the slowest factor gives


def test_the_slope_is_the_central_difference_of_the_step() -> None:
    def step(f: float) -> float:
        return 2.0 + 3.0 / f  # d step / d f at 1 = -3 (the central difference is within 1e-3 of it)

    slope = sensitivity(step, 5.0, "a rate", 0.5)
    assert slope.d_step_s_d_parameter == pytest.approx(-3.0 / 0.5, rel=1e-3)
    assert slope.elasticity == pytest.approx(-3.0 / 5.0, rel=1e-3)
    assert slope.step_minus_s == step(1 - RELATIVE_STEP) and slope.step_plus_s == step(1 + RELATIVE_STEP)
    assert sensitivity(step, 5.0, "unset", 0.0).d_step_s_d_parameter is None


def test_the_share_of_a_range_is_the_log_distance_to_its_edge() -> None:
    r = FactorRange(0.5, 2.0, "a stated source")
    assert r.share(1.0) == 0.0 and r.share(0.5) == pytest.approx(1.0) and r.share(2.0) == pytest.approx(1.0)
    assert r.share(math.sqrt(2.0)) == pytest.approx(0.5) and r.share(0.25) == pytest.approx(2.0)
    assert FactorRange(0.5, 1.0, "capped at line rate").share(1.1) == math.inf  # no room above 1
