"""Prediction intervals at a stated level, from left-out residuals of similar published cases.

``interval_for`` (or ``spread_for``, to size several figures of one job) gives the interval of a
prediction by split conformal prediction over the leave-one-source-out residuals in
``residuals.toml`` (``clustersim.intervals.residuals``), grouped by kind, chip, framework and scale
where there are enough cases and pooled otherwise (``clustersim.intervals.lookup``); the conformal
ranks are in ``clustersim.intervals.conformal``. This package sits just above the catalog, so every
estimator, planner and report can use it.
"""

from clustersim.intervals.conformal import DEFAULT_LEVEL, Interval, Spread, check_level
from clustersim.intervals.lookup import MIN_CASES, chip_of, interval_for, spread_for
from clustersim.intervals.residuals import Residual, ResidualTable, load_residuals

__all__ = [
    "DEFAULT_LEVEL",
    "MIN_CASES",
    "Interval",
    "Residual",
    "ResidualTable",
    "Spread",
    "check_level",
    "chip_of",
    "interval_for",
    "load_residuals",
    "spread_for",
]
