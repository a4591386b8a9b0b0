"""Software constants in leave-one-source-out: what a framework profile was fitted on is left out too.

A software profile (``compute/software.toml``) may carry constants fitted to ground truth: its kernels'
share of the hardware's efficiency and its host-side costs (``kernel_efficiency``, ``layer_overhead_s``,
``step_overhead_s``; stated priors 1, 0 and 0 unless the profile says it was fitted). When every
case they were fitted on (the profile's ``fitted_on``; without one, every case of the framework) comes
from one source, a fit without that source has nothing to fit them on: the held-out prediction of the
source takes the priors, as a user's new framework would, however many other sources use the
framework. Where other sources were fitted on too, the constants stay as fitted and the note says so
(they are fitted outside the efficiency fit, so they are not refit here).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.compute.software import SoftwareProfile, software_profiles
from clustersim.training.estimate import Estimate
from clustersim.validation.cases import Case
from clustersim.validation.fit import Prepared
from clustersim.validation.manifest import read_manifest
from clustersim.validation.software_spec import SOFTWARE, SOFTWARE_PRIORS, framework_of
from clustersim.validation.training import case_estimator, case_value

PRIOR_VALUES: dict[str, float] = {key: value for key, (value, _) in SOFTWARE_PRIORS.items()}


def fitted_software(profile: SoftwareProfile) -> dict[str, float]:
    """The constants a profile says were fitted (``fitted`` set) and that differ from their priors."""
    if profile.fitted is None:
        return {}
    return {key: getattr(profile, key) for key, prior in PRIOR_VALUES.items() if getattr(profile, key) != prior}


def held_out_software(
    cases: Sequence[Prepared[Any]],
    source: str,
    catalog: Catalog,
    profiles: Mapping[str, SoftwareProfile] | None = None,
) -> tuple[list[Prepared[Any]], str]:
    """``source``'s training cases among ``cases``, each predicting with the software constants fitted
    on that source alone reset to their priors; and a note naming what was reset or kept."""
    table = dict(software_profiles() if profiles is None else profiles)
    manifest = read_manifest(SOFTWARE)
    users: dict[str, set[str]] = {}  # per framework, the sources its fitted constants were fitted on
    for prepared in cases:
        name = framework_of(prepared.case)
        entry = manifest.get(name)
        if entry is None or not entry.fitted_on or prepared.case.id in entry.fitted_on:
            users.setdefault(name, set()).add(prepared.source)
    own = [p for p in cases if p.source == source]
    reset: dict[str, SoftwareProfile] = {}
    notes: list[str] = []
    for name in sorted({framework_of(p.case) for p in own}):
        profile = table.get(name)
        fitted = fitted_software(profile) if profile is not None else {}
        if profile is None or not fitted:
            continue
        names = ", ".join(f"{name}.{key}" for key in fitted)
        if users.get(name, set()) <= {source}:
            reset[name] = profile.model_copy(update={key: PRIOR_VALUES[key] for key in fitted})
            notes.append(f"{names} fitted on it alone: held out at the priors")
        elif source in users.get(name, set()):
            notes.append(f"{names} fitted with it (not refit)")
        else:
            notes.append(f"{names} fitted without it (its cases are out of sample already)")
    if not reset:
        return own, "; ".join(notes)
    table.update(reset)
    out = [
        Prepared(
            p.case,
            p.field,
            p.measured,
            p.source,
            p.group,
            _predictor(p.case, case_estimator(p.case, catalog, table), p.field),
        )
        for p in own
    ]
    return out, "; ".join(notes)


def _predictor(case: Case, estimator: Callable[[Any], Estimate], field: str) -> Callable[[Any], float]:
    def predict(calibration: Any) -> float:
        return case_value(case, estimator(calibration), field)

    return predict
