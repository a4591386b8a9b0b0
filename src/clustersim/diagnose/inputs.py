"""What a diagnosis re-runs: one training step's inputs, and its terms with a parameter moved.

``StepInputs`` holds what ``training.estimate.estimate_training`` was given (model, system, layout, job,
the family's efficiency fractions, the framework profile, the collective calibration and, where the job was
placed on the simulated fabric (``--network sim``), each group shape's contention factor on the analytic
time, held while a calibration moves). ``terms_s`` prices every registered step term
(``training.terms.STEP_TERMS``) through ``training.step.step_terms``, the estimator's own function, with any
of the three calibrations replaced: nothing here re-derives a term.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from clustersim.compute.efficiency import FamilyEfficiency
from clustersim.compute.software import SoftwareProfile
from clustersim.execution import Layout, LayoutArrays
from clustersim.network.analytic import CommCalibration
from clustersim.network.collectives import Op
from clustersim.network.cost import AnalyticCost, CollectiveCost
from clustersim.network.fabric import Fabric
from clustersim.system import System
from clustersim.training.contention import ContendedCost
from clustersim.training.job import TrainingJob
from clustersim.training.step import step_terms
from clustersim.workload.transformer import Transformer


@dataclass(frozen=True)
class StepInputs:
    """One estimate's inputs; the analytic collective model prices its collectives with ``calibration`` (times
    ``contention``'s factor of their group shape, where given)."""

    model: Transformer
    system: System
    layout: Layout
    job: TrainingJob
    efficiency: FamilyEfficiency
    software: SoftwareProfile
    calibration: CommCalibration
    contention: Mapping[tuple[Op, Fabric], float] | None = None

    def terms_s(
        self,
        *,
        efficiency: FamilyEfficiency | None = None,
        software: SoftwareProfile | None = None,
        calibration: CommCalibration | None = None,
        link: bool = False,
    ) -> dict[str, float]:
        """Exposed seconds per step of every term (``link``: busy seconds on its links or units, overlapped
        or not), with the calibrations given in place of the inputs' own."""
        terms = step_terms(
            self.model,
            self.system,
            efficiency or self.efficiency,
            LayoutArrays.of([self.layout]),
            seq_len=self.job.seq_len,
            global_batch=self.job.global_batch,
            precision=self.job.precision,
            cost=self._cost(calibration or self.calibration),
            software=software or self.software,
        )
        return {name: float((times.link_s if link else times.exposed_s)[0]) for name, times in terms.times.items()}

    def _cost(self, calibration: CommCalibration) -> CollectiveCost:
        analytic = AnalyticCost(calibration=calibration)
        return analytic if self.contention is None else ContendedCost(dict(self.contention), base=analytic)

    @property
    def micro_batches(self) -> int:
        """Micro-batches per step and pipeline (as ``training.step.StepContext.micro_batches``)."""
        return max(self.job.global_batch // (self.layout.dp * self.layout.micro_batch), 1)

    @property
    def bubble_per_term(self) -> float:
        """Seconds the pipeline bubble adds per second of a term that runs once per micro-batch on the
        critical path (compute, recompute, TP/CP/EP exposed time, PP sends): the bubble idles for
        ``(pp - 1) / vp`` micro-batch times (``training.step``'s ``pipeline bubble``), i.e.
        ``(pp - 1) / vp / m`` of such a term's step total."""
        return (self.layout.pp - 1) / self.layout.vp / self.micro_batches

    def with_bubble(self, term: str) -> float:
        """Seconds of the step per second of ``term``: its own, and the bubble's share of it (data-parallel
        communication runs once per step, outside the bubble)."""
        return 1.0 if term == "dp comm" else 1.0 + self.bubble_per_term
