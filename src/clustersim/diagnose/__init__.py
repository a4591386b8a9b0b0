"""Diagnose a slow (or fast) training run: set a measured step against the estimate and rank the terms
whose plausible ranges could explain the gap, each with the factor it needs and the sensitivity behind it
(``clustersim explain``). Sits beside the planner: above the estimators it re-runs, below the command line."""

from clustersim.diagnose.gap import Bounds, Candidate, Explanation, FactorRange, explain_step
from clustersim.diagnose.inputs import StepInputs

__all__ = ["Bounds", "Candidate", "Explanation", "FactorRange", "StepInputs", "explain_step"]
