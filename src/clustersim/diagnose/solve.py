"""The factor at which a lever's step time meets the measured one, and the step's slope there."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

MIN_FACTOR = 1e-3
RELATIVE_STEP = 0.01  # the +-1% of a parameter its sensitivity is measured over
_ITERATIONS = 80


def factor_for(step_s: Callable[[float], float], target_s: float, low: float, high: float) -> float | None:
    """The factor in [low, high] (both > 0) at which the monotone ``step_s`` equals ``target_s``, found by
    false position with the Illinois rule on the log of the factor; None where no factor in the range
    reaches it (the lever alone cannot close the gap)."""
    a, b = math.log(low), math.log(high)
    fa, fb = step_s(low) - target_s, step_s(high) - target_s
    tolerance = 1e-9 * max(abs(target_s), 1e-12)
    if abs(fa) <= tolerance:
        return low
    if abs(fb) <= tolerance:
        return high
    if fa * fb > 0:
        return None
    for _ in range(_ITERATIONS):
        x = (a * fb - b * fa) / (fb - fa)
        fx = step_s(math.exp(x)) - target_s
        if abs(fx) <= tolerance or abs(b - a) < 1e-12:
            return math.exp(x)
        if fx * fb < 0:
            a, fa = b, fb
        else:
            fa /= 2  # Illinois: the end that stays counts half, so it does not stay for ever
        b, fb = x, fx
    return math.exp(b)


@dataclass(frozen=True)
class Sensitivity:
    """The step's slope in one parameter, from the estimate re-run at the parameter +-``RELATIVE_STEP``."""

    parameter: str
    value: float  # the parameter in force
    step_minus_s: float  # step at value x (1 - RELATIVE_STEP)
    step_plus_s: float  # step at value x (1 + RELATIVE_STEP)
    d_step_s_d_parameter: float | None  # seconds per unit of the parameter (None: the parameter is 0)
    elasticity: float  # d ln step / d ln parameter

    def to_json(self) -> dict[str, float | str | None]:
        return {
            "parameter": self.parameter,
            "value": self.value,
            "step_minus_s": self.step_minus_s,
            "step_plus_s": self.step_plus_s,
            "relative_step": RELATIVE_STEP,
            "d_step_s_d_parameter": self.d_step_s_d_parameter,
            "elasticity": self.elasticity,
        }


def sensitivity(step_s: Callable[[float], float], base_s: float, parameter: str, value: float) -> Sensitivity:
    """Central difference of ``step_s`` (a function of the factor on ``value``) at factor 1."""
    minus, plus = step_s(1.0 - RELATIVE_STEP), step_s(1.0 + RELATIVE_STEP)
    change = (plus - minus) / (2 * RELATIVE_STEP)
    return Sensitivity(
        parameter=parameter,
        value=value,
        step_minus_s=minus,
        step_plus_s=plus,
        d_step_s_d_parameter=change / value if value > 0 else None,
        elasticity=change / base_s,
    )
