"""A checkpoint policy for a run: the interval (Young/Daly's, or given), the expected run, and how the
answer moves with the failure rate, the checkpoint time and the restart time."""

from __future__ import annotations

from dataclasses import dataclass

from clustersim.errors import ClusterSimError
from clustersim.reliability.failures import Goodput, daly_interval_s, expected_run, young_interval_s

SENSITIVITY_FACTORS = (0.5, 2.0)


@dataclass(frozen=True)
class Policy:
    """The inputs of a run's failure model: work, checkpoint stall, restart, job MTBF, interval."""

    work_s: float
    checkpoint_s: float
    restart_s: float
    mtbf_s: float
    interval_s: float | None = None  # None: Daly's optimum

    @property
    def chosen_interval_s(self) -> float:
        """The given interval, or Daly's optimum."""
        return self.interval_s if self.interval_s is not None else daly_interval_s(self.checkpoint_s, self.mtbf_s)

    @property
    def young_s(self) -> float:
        """Young's first-order optimum."""
        return young_interval_s(self.checkpoint_s, self.mtbf_s)

    @property
    def daly_s(self) -> float:
        """Daly's higher-order optimum."""
        return daly_interval_s(self.checkpoint_s, self.mtbf_s)

    def run(self) -> Goodput:
        """The expected run at the chosen interval."""
        return expected_run(
            self.work_s,
            interval_s=self.chosen_interval_s,
            checkpoint_s=self.checkpoint_s,
            restart_s=self.restart_s,
            mtbf_s=self.mtbf_s,
        )


@dataclass(frozen=True)
class SensitivityRow:
    """One input scaled, the interval chosen again (or kept, when given) and the run it gives."""

    factor_name: str  # "failure rate", "checkpoint time" or "restart time"
    factor: float
    run: Goodput


def sensitivity(policy: Policy) -> list[SensitivityRow]:
    """The run with the failure rate, the checkpoint time and the restart time each halved and doubled."""
    rows = [SensitivityRow("baseline", 1.0, policy.run())]
    for factor in SENSITIVITY_FACTORS:
        scaled = {
            "failure rate": Policy(
                policy.work_s, policy.checkpoint_s, policy.restart_s, policy.mtbf_s / factor, policy.interval_s
            ),
            "checkpoint time": Policy(
                policy.work_s, policy.checkpoint_s * factor, policy.restart_s, policy.mtbf_s, policy.interval_s
            ),
            "restart time": Policy(
                policy.work_s, policy.checkpoint_s, policy.restart_s * factor, policy.mtbf_s, policy.interval_s
            ),
        }
        for name, scaled_policy in scaled.items():
            try:
                rows.append(SensitivityRow(name, factor, scaled_policy.run()))
            except ClusterSimError as exc:  # the baseline finishes, this one does not: say which
                message = f"{exc} (with the {name} x{factor:g})"
                raise ClusterSimError(message, field=exc.field, value=exc.value) from None
    return rows
