"""The fit spec of the software profiles' fitted constants (``compute/software.toml``).

A profile that says it was fitted (a ``fitted`` note) has its kernels' share of the hardware's GEMM
efficiency (``kernel_efficiency``) and its host-side costs (``layer_overhead_s``, ``step_overhead_s``)
fitted to the training cases of its framework, one group per framework, with the hardware's
fractions (``compute/efficiency.toml``) held as they are; a field the profile marks ``prior`` keeps
its value. Objective: the mean over sources of the mean |log error|, as the hardware fit.
``benchmarks/calibrate_software.py`` runs it; ``validate --cross-validate`` holds a constant fitted
on one source alone at ``SOFTWARE_PRIORS`` when that source is left out
(``clustersim.validation.software_holdout``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from clustersim.catalog.registry import Catalog
from clustersim.compute import software
from clustersim.compute.software import DEFAULT_FRAMEWORK, SoftwareProfile, software_profiles
from clustersim.validation.cases import Case
from clustersim.validation.fit import Constant, FitSpec, Prepared
from clustersim.validation.specs import replace_fields
from clustersim.validation.training import case_estimator, case_framework, case_value

Profiles = Mapping[str, SoftwareProfile]

SOFTWARE_BOUNDS: dict[str, tuple[float, float]] = {
    "kernel_efficiency": (0.3, 1.0),  # a framework's kernels reach at least a third of the best ones
    "layer_overhead_s": (1e-5, 1e-2),  # host work per layer and micro-batch: tens of microseconds to 10 ms
    "step_overhead_s": (1e-3, 10.0),  # host work per optimizer step
}

SOFTWARE_PRIORS: dict[str, tuple[float, str]] = {
    "kernel_efficiency": (1.0, "kernels at the hardware's fitted rate (the Megatron stacks the fractions come from)"),
    "layer_overhead_s": (0.0, "no host-side cost per layer beyond the kernels' own"),
    "step_overhead_s": (0.0, "no host-side cost per step beyond the hardware's step_s"),
}
"""The stated prior of each software constant: what a framework with no fitted data gets."""


def framework_of(case: Case) -> str:
    """The profile name a case is scored with."""
    return (case_framework(case) or DEFAULT_FRAMEWORK).strip().lower()


def fitted_frameworks(profiles: Profiles | None = None) -> set[str]:
    """The profiles that say they were fitted (a ``fitted`` note)."""
    table = software_profiles() if profiles is None else profiles
    return {name for name, profile in table.items() if profile.fitted is not None}


def _prepare(case: Case, field: str, catalog: Catalog, profiles: Profiles) -> tuple[str, Callable[[Profiles], float]]:
    case_estimator(case, catalog, dict(profiles))  # refuse what cannot be estimated now, not mid-fit

    def predict(candidate: Profiles) -> float:
        return case_value(case, case_estimator(case, catalog, dict(candidate))(None), field)

    return framework_of(case), predict


def _constants(profiles: Profiles, group: str, cases: Sequence[Prepared[Profiles]]) -> list[Constant]:
    return [Constant(group, key, low, high) for key, (low, high) in SOFTWARE_BOUNDS.items()]


SOFTWARE: FitSpec[Profiles] = FitSpec(
    kind="training",
    package=software.PACKAGE,
    file_name=software.FILE_NAME,
    env_var=software.ENV_VAR,
    loss="log-by-source",
    method="coordinate",
    max_iterations=20,
    objective="mean over sources of the mean |log error| of each case's primary field, per framework",
    current=lambda: software_profiles(),
    selects=lambda case: framework_of(case) in fitted_frameworks(),
    prepare=_prepare,
    constants=_constants,
    get=lambda profiles, c: float(getattr(profiles[c.table], c.key)),
    replace=replace_fields,
    fallback=lambda group: None,
    prior=lambda profiles, c: SOFTWARE_PRIORS.get(c.key),
)
