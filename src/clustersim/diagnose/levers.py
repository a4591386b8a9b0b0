"""The levers a diagnosis moves: one model parameter each, and the step time it gives at a factor.

A lever scales one parameter of the estimate by a factor ``f`` and re-prices the step:

- rate levers (the time goes as ``1 / f``): a compute fraction of ``efficiency.toml`` (GEMMs at
  ``gemm_max``, the attention core at ``attention``, element-wise work at ``memory_efficiency``), the whole
  step re-estimated; or the achieved bandwidth of one parallel dimension's collectives (the
  ``calibration.toml`` fractions of NVLink, NVLS and the network, each at most line rate), that term
  alone re-priced, with the pipeline bubble's share of it (``StepInputs.bubble_per_term``);
- time levers (the time goes as ``f``): the fixed cost per optimizer step (``step_s``) re-estimated, or a
  term the model has no separate parameter for (recompute, activation offload, the pipeline bubble) scaled;
- the one added term the model does not price: data loading (``f`` is then seconds per step).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum

from clustersim.diagnose.hints import hint
from clustersim.diagnose.inputs import StepInputs
from clustersim.network.analytic import CommCalibration

COMM_TERMS = ("tp comm", "cp comm", "ep comm", "pp comm", "dp comm")


class Kind(StrEnum):
    """How a lever's factor acts on the time it controls."""

    RATE = "rate"  # a rate times f: the time over f
    TIME = "time"  # a time times f
    ADDED = "added"  # seconds added per step


@dataclass(frozen=True)
class Lever:
    """One parameter a diagnosis moves: ``step_s(base_terms, f)`` is the step with it scaled by ``f``."""

    key: str  # the step term it names, or the compute part
    label: str
    parameter: str  # what ``f`` multiplies, in words
    value: float  # the parameter's value in force (for d step / d parameter)
    kind: Kind
    terms: tuple[str, ...]  # the registered step terms it moves
    hint: str
    step_s: Callable[[dict[str, float], float], float]
    max_factor: float = 1e3  # beyond it nothing changes (a bandwidth at line rate), or nothing physical
    network: bool = False  # a collective whose groups cross the scale-out network


def _total(terms: dict[str, float]) -> float:
    return float(sum(terms.values()))


def compute_levers(inputs: StepInputs) -> list[Lever]:
    """GEMMs, attention, element-wise work and the optimizer's fixed cost: the whole step re-estimated."""
    eff, fw, eager = inputs.efficiency, inputs.software.name, inputs.software.eager_elementwise

    def scaled(**fields: float) -> Callable[[dict[str, float], float], float]:
        def step_s(base: dict[str, float], factor: float) -> float:
            update = {name: getattr(eff, name) * (factor**power) for name, power in fields.items()}
            return _total(inputs.terms_s(efficiency=eff.model_copy(update=update)))

        return step_s

    compute = ("forward", "backward", "recompute", "pipeline bubble")
    levers = [
        # the attention core runs at gemm_max x attention: its own lever holds it there
        Lever("gemm", "compute (GEMMs)", "GEMM efficiency (gemm_max)", eff.gemm_max, Kind.RATE, compute,
              hint("gemm", fw, eager), scaled(gemm_max=1, attention=-1)),
        Lever("attention", "attention core", "attention efficiency (attention)", eff.attention, Kind.RATE,
              compute, hint("attention", fw, eager), scaled(attention=1)),
        Lever("memory", "memory-bound operations", "HBM efficiency (memory_efficiency)", eff.memory_efficiency,
              Kind.RATE, (*compute, "optimizer"), hint("memory", fw, eager), scaled(memory_efficiency=1)),
    ]  # fmt: skip
    if eff.step_s > 0:
        levers.append(
            Lever("optimizer", "optimizer step", "fixed seconds per optimizer step (step_s)", eff.step_s, Kind.TIME,
                  ("optimizer",), hint("optimizer", fw, eager), scaled(step_s=1))
        )  # fmt: skip
    return levers


def scaled_bandwidth(cal: CommCalibration, factor: float) -> CommCalibration:
    """``cal`` with its achieved fractions of NVLink, NVLS and the network times ``factor``, each at most 1."""
    return replace(
        cal,
        nvlink_efficiency=min(cal.nvlink_efficiency * factor, 1.0),
        nvls_efficiency=min(cal.nvls_efficiency * factor, 1.0),
        network_efficiency=min(cal.network_efficiency * factor, 1.0),
    )


def comm_levers(inputs: StepInputs, base: dict[str, float]) -> list[Lever]:
    """One lever per parallel dimension whose collectives are on the critical path: their achieved
    bandwidth (every calibrated fraction, each at most line rate) for that term alone."""
    cal, fw, eager = inputs.calibration, inputs.software.name, inputs.software.eager_elementwise
    line_rate = 1.0 / min(cal.nvlink_efficiency, cal.nvls_efficiency, cal.network_efficiency)  # all at 1 beyond it
    labels = {"tp comm": "TP", "cp comm": "CP", "ep comm": "EP", "pp comm": "PP", "dp comm": "DP"}
    links = inputs.terms_s(link=True)  # a term with time on its links, hidden or not, a slower fabric can expose
    slow_network = inputs.terms_s(calibration=replace(cal, network_efficiency=cal.network_efficiency / 2), link=True)
    levers = []
    for term in COMM_TERMS:
        if links.get(term, 0.0) <= 0:
            continue
        network = slow_network[term] > links[term] * (1 + 1e-9)  # its groups span scale-up domains
        share = inputs.with_bubble(term)

        def step_s(now: dict[str, float], factor: float, term: str = term, share: float = share) -> float:
            moved = scaled_bandwidth(cal, factor)
            return _total(now) + share * (inputs.terms_s(calibration=moved)[term] - now[term])

        anchor = "network_efficiency" if network else "nvlink_efficiency"
        levers.append(
            Lever(term, f"{labels[term]} exposed communication", f"modelled busbw ({anchor} and the other fractions)",
                  getattr(cal, anchor), Kind.RATE, (term,), hint(term, fw, eager), step_s, max_factor=line_rate,
                  network=network)
        )  # fmt: skip
    return levers


def term_levers(inputs: StepInputs, base: dict[str, float]) -> list[Lever]:
    """Recompute, activation offload and the pipeline bubble, scaled as they stand; data loading, added."""
    levers, fw, eager = [], inputs.software.name, inputs.software.eager_elementwise
    if base.get("recompute", 0.0) > 0:
        share = inputs.with_bubble("recompute")

        def recompute(now: dict[str, float], factor: float) -> float:
            return _total(now) + (factor - 1.0) * now["recompute"] * share

        levers.append(
            Lever("recompute", "recompute", "recomputed seconds", base["recompute"], Kind.TIME, ("recompute",),
                  hint("recompute", fw, eager), recompute)
        )  # fmt: skip
    if base.get("activation offload", 0.0) > 0:
        offload_share = inputs.with_bubble("activation offload")

        def offload(now: dict[str, float], factor: float) -> float:
            return _total(now) + (factor - 1.0) * now["activation offload"] * offload_share

        levers.append(
            Lever("activation offload", "activation offload", "exposed copy seconds", base["activation offload"],
                  Kind.TIME, ("activation offload",), hint("activation offload", fw, eager), offload)
        )  # fmt: skip
    if base.get("pipeline bubble", 0.0) > 0:

        def bubble(now: dict[str, float], factor: float) -> float:
            return _total(now) + (factor - 1.0) * now["pipeline bubble"]

        levers.append(
            Lever("pipeline bubble", "pipeline bubble", "idle seconds of the schedule", base["pipeline bubble"],
                  Kind.TIME, ("pipeline bubble",), hint("pipeline bubble", fw, eager), bubble)
        )  # fmt: skip

    def loading(now: dict[str, float], added_s: float) -> float:
        return _total(now) + added_s

    levers.append(
        Lever("data loading", "data loading", "seconds per step waiting for data (not modelled: 0)", 0.0, Kind.ADDED,
              (), hint("data loading", fw, eager), loading)
    )  # fmt: skip
    return levers


def levers_for(inputs: StepInputs, base: dict[str, float]) -> list[Lever]:
    """Every lever of this step: compute, each exposed collective, recompute, the bubble, data loading."""
    return [*compute_levers(inputs), *comm_levers(inputs, base), *term_levers(inputs, base)]
