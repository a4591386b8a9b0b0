"""The fit spec of each calibrated case kind: which constants, their physical bounds, the objective.

* ``TRAINING`` fits, per accelerator family (each family's cases fit that family's constants only),
  the fractions of ``compute/efficiency.toml``: ``gemm_max``, ``gemm_half_flop``, ``attention``,
  ``memory_efficiency`` and, where the family has FP8 or FP4 cases (``compute.precision``),
  ``fp8_efficiency_ratio``; objective: the mean over sources of the mean |log error| of each case's
  primary field (every source weighs the same); compass search.
* ``COLLECTIVE`` fits the network efficiency and the message-size ramp of
  ``network/calibration.toml`` to the busbw of the cases of at least 1 MiB (below, NCCL's small
  messages are latency-bound: the catalogued adapter latencies, not these constants); objective: the
  mean over sources of the mean |log error|; compass search.
* ``INFERENCE`` fits the GEMM fraction and its size curve, the attention fraction and the three
  overheads of ``serving/calibration.toml`` to the reference engine's dense serving cases, and the MoE
  layer's cost per token (``moe_token_layer_s``) to its MoE cases (group ``moe``); objective: the MAPE;
  Nelder-Mead.

Bounds are physical: fractions within (0, 1] (and above what any published run reaches at the low
end), times within what a kernel launch, a host step or a collective's ramp can plausibly take.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from clustersim.catalog.registry import Catalog
from clustersim.compute import efficiency
from clustersim.compute.efficiency import FALLBACK_FAMILY, FamilyEfficiency, efficiency_table
from clustersim.compute.precision import QUANTIZED_FORMATS
from clustersim.network import analytic
from clustersim.network.analytic import CommCalibration
from clustersim.serving import engine
from clustersim.serving.engine import InferenceCalibration
from clustersim.validation.cases import Case
from clustersim.validation.collective import predict_collective_case
from clustersim.validation.fit import ALL, Constant, FitSpec, Prepared
from clustersim.validation.inference import fits_reference_calibration, predict_inference_case
from clustersim.validation.systems import system_from_case
from clustersim.validation.training import case_estimator, case_value

EfficiencyTable = Mapping[str, FamilyEfficiency]

# ---- training: per-family hardware fractions ------------------------------------------------------

TRAINING_BOUNDS: dict[str, tuple[float, float]] = {
    "gemm_max": (0.4, 0.95),
    "gemm_half_flop": (1e7, 1e11),
    "attention": (0.1, 1.0),
    "memory_efficiency": (0.3, 0.95),
    "fp8_efficiency_ratio": (0.3, 1.0),
    "step_s": (1e-3, 0.3),  # host and optimizer fixed cost per step: milliseconds to a few hundred
    "expert_gemm_s": (1e-6, 1e-4),  # a few launches and casts per expert: microseconds to tens of them
}

TRAINING_PRIORS: dict[str, tuple[float, str]] = {
    "expert_gemm_s": (
        4e-6,
        "one more kernel's fixed cost per FP8 expert slice (the quantization of its input): the 4 us per kernel "
        "of the gemm_half_flop prior (a CUDA launch and its last-wave tail: NVIDIA's 'Getting Started with CUDA "
        "Graphs' and GEMM background guide)",
    ),
    "fp8_efficiency_ratio": (
        1.0,
        "no FP8 penalty without FP8 data: an FP8 GEMM reaches the same fraction of the FP8 peak as BF16 of its own",
    ),
    "step_s": (
        5e-3,
        "the A100 runs' stated prior (efficiency.toml, ampere.prior.step_s): a gradient-norm reduction, the "
        "optimizer's per-tensor launches and one host synchronisation take milliseconds",
    ),
}
"""The value of a training constant that no case informs (a family's other constants fall back to
the fallback family's values)."""


def _training_prior(table: EfficiencyTable, constant: Constant) -> tuple[float, str] | None:
    if constant.key in TRAINING_PRIORS:
        return TRAINING_PRIORS[constant.key]
    fallback = FALLBACK_FAMILY if constant.table != FALLBACK_FAMILY else None
    if fallback is None or fallback not in table:
        return None
    return float(getattr(table[fallback], constant.key)), f"{fallback}'s value (the family without data borrows it)"


def _training_prepare(
    case: Case, field: str, catalog: Catalog, table: EfficiencyTable
) -> tuple[str, Callable[[EfficiencyTable], float]]:
    estimator = case_estimator(case, catalog)
    family = system_from_case(catalog, case.system).accelerator.family
    group = family if family in table else FALLBACK_FAMILY

    def predict(candidate: EfficiencyTable) -> float:
        return case_value(case, estimator(candidate), field)

    return group, predict


def _training_constants(
    table: EfficiencyTable, family: str, cases: Sequence[Prepared[EfficiencyTable]]
) -> list[Constant]:
    fp8 = [c for c in cases if c.case.precision in QUANTIZED_FORMATS]  # 8- and 4-bit GEMMs
    fp8_moe = any(c.case.model is not None and c.case.model.moe is not None for c in fp8)  # expert_gemm_s is FP8's
    return [
        Constant(family, key, low, high)
        for key, (low, high) in TRAINING_BOUNDS.items()
        if (key != "fp8_efficiency_ratio" or fp8) and (key != "expert_gemm_s" or fp8_moe)
    ]


M = TypeVar("M", bound=BaseModel)


def replace_fields(table: Mapping[str, M], values: Mapping[Constant, float]) -> dict[str, M]:
    """``table`` (records by name) with each constant's field set in the record its table names."""
    updates: dict[str, dict[str, float]] = {}
    for constant, value in values.items():
        updates.setdefault(constant.table, {})[constant.key] = value
    return {name: entry.model_copy(update=updates[name]) if name in updates else entry for name, entry in table.items()}


TRAINING: FitSpec[EfficiencyTable] = FitSpec(
    kind="training",
    package=efficiency.PACKAGE,
    file_name=efficiency.FILE_NAME,
    env_var=efficiency.ENV_VAR,
    loss="log-by-source",
    method="coordinate",
    max_iterations=40,
    objective="mean over sources of the mean |log error| of each case's primary field",
    current=lambda: efficiency_table(),
    selects=lambda case: True,
    prepare=_training_prepare,
    constants=_training_constants,
    get=lambda table, c: float(getattr(table[c.table], c.key)),
    replace=replace_fields,
    fallback=lambda family: None if family == FALLBACK_FAMILY else FALLBACK_FAMILY,
    prior=_training_prior,
)

# ---- collectives: network efficiency and the message-size ramp ------------------------------------

COLLECTIVE_MIN_SIZE_BYTES = 2**20
COLLECTIVE_BOUNDS: dict[str, tuple[float, float]] = {
    "network_efficiency": (0.3, 1.0),
    "ramp_exponent": (0.2, 4.0),
    "ramp_bytes": (1e5, 1e9),  # the Simple ramp's half size: about what NCCL's channels hold in flight
    "ramp_s": (1e-6, 1e-2),  # the same ramp as a time constant, where the calibration states it so
    "ramp_node_exponent": (0.01, 2.0),
}
"""The fitted entries of the collective calibration, those it has (one constant per op family of an
entry that holds one value per family); every other entry is a stated value with its source."""


def _collective_constants(
    cal: CommCalibration, group: str, cases: Sequence[Prepared[CommCalibration]]
) -> list[Constant]:
    out: list[Constant] = []
    for name, (low, high) in COLLECTIVE_BOUNDS.items():
        value = getattr(cal, name, None)
        if isinstance(value, int | float):
            out.append(Constant(name, "value", low, high))
        elif value is not None:
            out.extend(Constant(name, f.name, low, high) for f in dataclasses.fields(value))
    return out


def _collective_prepare(
    case: Case, field: str, catalog: Catalog, cal: CommCalibration
) -> tuple[str, Callable[[CommCalibration], float]]:
    def predict(candidate: CommCalibration) -> float:
        return predict_collective_case(case, field, catalog, candidate)

    return ALL, predict


def _collective_get(cal: CommCalibration, constant: Constant) -> float:
    value = getattr(cal, constant.table)
    return float(value if constant.key == "value" else value[constant.key])


def _collective_replace(cal: CommCalibration, values: Mapping[Constant, float]) -> CommCalibration:
    scalars = {c.table: v for c, v in values.items() if c.key == "value"}
    nested: dict[str, dict[str, float]] = {}
    for constant, value in values.items():
        if constant.key != "value":
            nested.setdefault(constant.table, {})[constant.key] = value
    changes: dict[str, Any] = dict(scalars)
    changes.update({name: dataclasses.replace(getattr(cal, name), **fields) for name, fields in nested.items()})
    return dataclasses.replace(cal, **changes)


COLLECTIVE_PRIOR_FAMILY = "reduce"


# The all-reduce family's own stated priors, where it has one: held there when the only source that
# informs it is left out.
COLLECTIVE_FAMILY_PRIORS: dict[str, tuple[float, str]] = {
    "ramp_node_exponent": (
        1.0,
        "a ring's pipeline: NCCL's ring all-reduce passes each chunk through 2(n - 1) steps, so the bytes in "
        "flight that hide its per-step latency grow as the node count (a tree's as its log; rings carry large "
        "messages)",
    ),
}


def _collective_prior(cal: CommCalibration, constant: Constant) -> tuple[float, str] | None:
    """A per-op-family constant no case informs takes the all-reduce family's value (the same
    channels, chunks and pipeline); the all-reduce family its stated prior where it has one
    (``COLLECTIVE_FAMILY_PRIORS``); a single-valued entry has no prior."""
    if constant.key == COLLECTIVE_PRIOR_FAMILY:
        return COLLECTIVE_FAMILY_PRIORS.get(constant.table)
    if constant.key == "value":
        return None
    value = _collective_get(cal, dataclasses.replace(constant, key=COLLECTIVE_PRIOR_FAMILY))
    return value, f"the {COLLECTIVE_PRIOR_FAMILY} family's value (the same channels, chunks and pipeline)"


COLLECTIVE: FitSpec[CommCalibration] = FitSpec(
    kind="collective",
    package="clustersim.network",
    file_name=analytic.CALIBRATION_FILE,
    env_var=analytic.ENV_VAR,
    loss="log-by-source",
    method="coordinate",
    max_iterations=40,
    objective="mean over sources of the mean |log error| of busbw over the cases of at least 1 MiB",
    current=analytic.default_calibration,
    selects=lambda case: (case.size_bytes or 0) >= COLLECTIVE_MIN_SIZE_BYTES,
    prepare=_collective_prepare,
    constants=_collective_constants,
    get=_collective_get,
    replace=_collective_replace,
    fallback=lambda group: None,
    prior=_collective_prior,
)

# ---- serving: achieved fractions and overheads ----------------------------------------------------

INFERENCE_BOUNDS: dict[str, tuple[float, float]] = {
    "flop_efficiency": (0.2, 0.95),
    "gemm_half_tokens": (4.0, 2048.0),  # rows (tokens) at which a GEMM reaches half its fraction
    "attention_flop_efficiency": (0.1, 0.9),
    "step_overhead_s": (1e-5, 2e-2),
    "sync_overhead_s": (1e-7, 5e-4),
    "sequence_overhead_s": (1e-8, 1e-4),
    "moe_token_layer_s": (1e-8, 2e-6),  # a MoE layer's routing work per token: nanoseconds to microseconds
}
"""The fitted entries of the serving calibration, those it has; every other entry is a stated value."""


MOE_GROUP = "moe"
"""The serving cases of MoE models: they fit ``moe_token_layer_s`` alone, the dense cases every other constant."""


def _inference_constants(
    cal: InferenceCalibration, group: str, cases: Sequence[Prepared[InferenceCalibration]]
) -> list[Constant]:
    return [
        Constant(name, "value", low, high)
        for name, (low, high) in INFERENCE_BOUNDS.items()
        if hasattr(cal, name) and (name == "moe_token_layer_s") == (group == MOE_GROUP)
    ]


def _inference_prepare(
    case: Case, field: str, catalog: Catalog, cal: InferenceCalibration
) -> tuple[str, Callable[[InferenceCalibration], float]]:
    def predict(candidate: InferenceCalibration) -> float:
        return predict_inference_case(case, field, catalog, candidate)

    return (MOE_GROUP if case.model is not None and case.model.moe is not None else ALL), predict


def _inference_replace(cal: InferenceCalibration, values: Mapping[Constant, float]) -> InferenceCalibration:
    changes: dict[str, Any] = {c.table: v for c, v in values.items()}
    return dataclasses.replace(cal, **changes)


INFERENCE: FitSpec[InferenceCalibration] = FitSpec(
    kind="inference",
    package="clustersim.serving",
    file_name=engine.CALIBRATION_FILE,
    env_var=engine.ENV_VAR,
    loss="relative-by-case",
    method="nelder-mead",
    max_iterations=300,
    objective="mean absolute percentage error of output tokens per second over the cases",
    current=engine.default_calibration,
    selects=fits_reference_calibration,  # Trainium engines' cases fit the Neuron profiles, not this file
    prepare=_inference_prepare,
    constants=_inference_constants,
    get=lambda cal, c: float(getattr(cal, c.table)),
    replace=_inference_replace,
    fallback=lambda group: None,
)

SPECS: dict[str, FitSpec[Any]] = {"training": TRAINING, "collective": COLLECTIVE, "inference": INFERENCE}
"""The fit spec of each calibrated case kind (memory cases have no fitted constants)."""
