"""Failures of a large synchronous job: rates from published runs, the job's mean time between
failures, the restart cost, the Young/Daly checkpoint interval and the expected time to train.

A synchronous job stops when any of its devices or nodes fails, so with independent exponential
failures the job's rate is the sum: ``1 / MTBF = devices x rate_per_device + nodes x rate_per_node``.
A failure loses the work since the last checkpoint plus the restart (detection, a replacement node, reloading the
checkpoint, warm-up). With ``W`` seconds of failure-free work cut into intervals of ``tau`` seconds,
each followed by a checkpoint of ``delta`` seconds, and restarts of ``R`` seconds (failures during a
restart restart it), each segment of length ``L = tau + delta`` takes on average (Daly 2006, eq. 13,
exact for exponential failures)

    E[segment] = M e^(R/M) (e^(L/M) - 1)

The interval that minimizes it: Young (1974) ``tau = sqrt(2 delta M)``; Daly's higher-order
``tau = sqrt(2 delta M) (1 + sqrt(delta / 2M) / 3 + delta / 18M) - delta`` for ``delta < 2M``, else ``M``.
"""

from __future__ import annotations

import math
import sys
import tomllib
from dataclasses import dataclass
from importlib import resources

from clustersim.errors import ClusterSimError, UnknownNameError
from clustersim.units import format_seconds

HOUR_S = 3600.0
DAY_S = 86400.0


@dataclass(frozen=True)
class FailureRate:
    """Unexpected job interruptions per device-hour (the accelerators' own faults) and per node-hour
    (the host, its NICs and drives, the network and software around it), from a published run."""

    name: str
    per_device_hour: float
    source: str
    per_node_hour: float = 0.0
    note: str = ""

    def per_hour(self, num_devices: int, num_nodes: int) -> float:
        """Interruptions per hour of a job on ``num_devices`` devices in ``num_nodes`` nodes."""
        return num_devices * self.per_device_hour + num_nodes * self.per_node_hour


# Llama 3's Table 5 split: faults of the GPU itself (faulty GPU 148, HBM3 72, SRAM 19, GPU system processor
# 17, silent data corruption 6, thermal interface and sensor 6) per GPU; the rest (software 54, network
# switch and cable 35, host maintenance 32, NIC 7, NCCL watchdog 7, SSD 3, power supply 3, chassis 2, IO
# board 2, dependency 2, CPU 2, host memory 2) per node, 2,048 nodes of 8 GPUs.
_LLAMA3_GPU, _LLAMA3_NODE, _LLAMA3_HOURS = 268, 151, 54 * 24
RATES = {
    "llama3": FailureRate(
        name="llama3",
        per_device_hour=_LLAMA3_GPU / (_LLAMA3_HOURS * 16_384),
        per_node_hour=_LLAMA3_NODE / (_LLAMA3_HOURS * 2_048),
        source="Llama 3 Herd of Models (arXiv 2407.21783), section 3.3.4, Table 5: 419 unexpected interruptions "
        "in a 54-day snapshot of pre-training on 16,384 H100 GPUs (47 planned ones not counted)",
        note="268 of them faults of the GPU (64%), 151 of the host, network or software; one every ~3.1 hours.",
    ),
    "rsc1": FailureRate(
        name="rsc1",
        per_device_hour=0.0,
        per_node_hour=6.50e-3 / 24,
        source="Kokolis et al., Revisiting Reliability in Large-Scale ML Research Clusters (arXiv 2410.21680): "
        "RSC-1 (16k A100) 6.50 failures per 1,000 node-days, 8 GPUs per node",
        note="Research cluster, all job sizes; the paper projects a 16,384-GPU job's MTTF at ~1.8 hours.",
    ),
    "rsc2": FailureRate(
        name="rsc2",
        per_device_hour=0.0,
        per_node_hour=2.34e-3 / 24,
        source="Kokolis et al., Revisiting Reliability in Large-Scale ML Research Clusters (arXiv 2410.21680): "
        "RSC-2 (8k A100) 2.34 failures per 1,000 node-days, 8 GPUs per node",
    ),
}
DEFAULT_RATE = "llama3"


@dataclass(frozen=True)
class Prior:
    """A stated prior from ``priors.toml``: its value, the range its sources span, and the sources."""

    value: float
    source: str
    note: str = ""
    low: float | None = None
    high: float | None = None


def _priors() -> dict[str, Prior]:
    raw = tomllib.loads(resources.files("clustersim.reliability").joinpath("priors.toml").read_text())
    out = {}
    for name, table in raw.items():
        value = table.get("value_s", table.get("fraction"))
        out[name] = Prior(
            value=float(value), source=table["source"], note=table.get("note", ""),
            low=table.get("low_s"), high=table.get("high_s"),
        )  # fmt: skip
    return out


PRIORS = _priors()
# Restart without the reload (which the storage model gives): detecting the failure and replacing the
# node, then warm-up to full speed (priors.toml gives the sources and their ranges).
DETECT_REPLACE_S = PRIORS["detect_replace"].value
WARMUP_S = PRIORS["warmup"].value
IDLE_POWER_FRACTION = PRIORS["idle_power"].value


def failure_rate(spec: str | float) -> FailureRate:
    """A published rate by name (llama3, rsc1, rsc2) or a number of failures per device-hour."""
    if isinstance(spec, str) and spec.strip().lower() in RATES:
        return RATES[spec.strip().lower()]
    try:
        value = float(spec)
    except (TypeError, ValueError):
        raise UnknownNameError("failure_rate", str(spec), [*RATES, "<failures per device-hour>"]) from None
    if not (math.isfinite(value) and 0 < value < 1):
        raise ClusterSimError(
            f"failure rate: {value!r} failures per device-hour is not in (0, 1) (or a published rate: "
            f"{', '.join(RATES)})",
            field="failure_rate",
            value=value,
        )
    return FailureRate(name=f"{value:g}/device-hour", per_device_hour=value, source="given")


def job_mtbf_s(rate: FailureRate, *, num_devices: int, num_nodes: int) -> float:
    """Mean time between interruptions of a job on ``num_devices`` devices in ``num_nodes`` nodes."""
    for name, count in (("devices", num_devices), ("nodes", num_nodes)):
        if count < 1:
            raise ClusterSimError(f"{name} must be at least 1, got {count}", field=name, value=count)
    return HOUR_S / rate.per_hour(num_devices, num_nodes)


def check_time_s(name: str, value: float, *, positive: bool = True) -> None:
    """A finite time in seconds, positive (or, with ``positive`` false, zero or more); else a one-line refusal
    naming ``name`` and the value."""
    ok = math.isfinite(value) and (value > 0 if positive else value >= 0)
    if not ok:
        rule = "positive" if positive else "zero or more"
        raise ClusterSimError(f"{name}: must be a finite number, {rule}, got {value!r}", field=name, value=value)


def young_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Young's first-order optimum, ``sqrt(2 delta M)``."""
    check_time_s("checkpoint_s", checkpoint_s)
    check_time_s("mtbf_s", mtbf_s)
    return math.sqrt(2 * checkpoint_s) * math.sqrt(mtbf_s)  # two roots: the product may not fit a float


def daly_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimum (``M`` once the checkpoint takes 2M or more)."""
    check_time_s("checkpoint_s", checkpoint_s)
    check_time_s("mtbf_s", mtbf_s)
    if checkpoint_s >= 2 * mtbf_s:
        return mtbf_s
    ratio = checkpoint_s / (2 * mtbf_s)
    return math.sqrt(2 * checkpoint_s) * math.sqrt(mtbf_s) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - checkpoint_s


def segments(work_s: float, interval_s: float) -> tuple[int, float]:
    """Full intervals of work and the remainder (0 when the work divides evenly)."""
    check_time_s("work_s", work_s)
    check_time_s("interval_s", interval_s)
    if not math.isfinite(work_s / interval_s):
        raise ClusterSimError(
            f"interval_s: {format_seconds(work_s)} of work in intervals of {format_seconds(interval_s)} is more than "
            f"{sys.float_info.max:.3g} checkpoints; lengthen the interval",
            field="interval_s",
            value=interval_s,
        )
    full = math.floor(work_s / interval_s + 1e-12)
    rest = max(0.0, work_s - full * interval_s)
    return full, rest if rest > 1e-9 * min(work_s, interval_s) else 0.0


def _log_expm1(x: float) -> float:
    """``ln(e^x - 1)`` for ``x > 0`` without overflow."""
    return x + math.log1p(-math.exp(-x)) if x > 30 else math.log(math.expm1(x))


def segment_time_s(length_s: float, mtbf_s: float, restart_s: float) -> float:
    """Expected wall time of one segment of ``length_s`` (Daly's eq. 13); ``inf`` beyond a float."""
    ratio = length_s / mtbf_s
    if ratio == 0:  # below the smallest float: no failure within the segment
        return length_s
    log_time = math.log(mtbf_s) + restart_s / mtbf_s + _log_expm1(ratio)
    try:
        return math.exp(log_time)
    except OverflowError:
        return math.inf


@dataclass(frozen=True)
class Goodput:
    """The expected run: wall time, its split, and the fraction that is useful work."""

    work_s: float
    interval_s: float
    checkpoint_s: float
    restart_s: float
    mtbf_s: float
    expected_time_s: float
    num_checkpoints: int

    @property
    def goodput(self) -> float:
        """Useful work over wall time."""
        return self.work_s / self.expected_time_s

    @property
    def checkpoint_total_s(self) -> float:
        """Time spent writing checkpoints that were kept."""
        return self.num_checkpoints * self.checkpoint_s

    @property
    def expected_failures(self) -> float:
        """Interruptions expected over the run (wall time / MTBF)."""
        return self.expected_time_s / self.mtbf_s

    @property
    def lost_s(self) -> float:
        """Wall time lost to failures: rework and restarts."""
        return self.expected_time_s - self.work_s - self.checkpoint_total_s

    @property
    def restart_total_s(self) -> float:
        """Wall time in restarts: one restart attempt per failure, each cut short by the next failure within it
        (a failure during a restart starts it over), so ``M (1 - e^(-R/M))`` a failure (within the time lost)."""
        per_failure = self.mtbf_s * -math.expm1(-self.restart_s / self.mtbf_s)
        return min(self.lost_s, self.expected_failures * per_failure)

    @property
    def rework_s(self) -> float:
        """Wall time redoing work lost since the last checkpoint."""
        return self.lost_s - self.restart_total_s

    @property
    def waiting_s(self) -> float:
        """Wall time the devices wait: checkpoint stalls and restarts."""
        return self.checkpoint_total_s + self.restart_total_s


def _overflow_cause(restart_s: float, checkpoint_s: float, work_part_s: float, mtbf_s: float) -> tuple[str, float]:
    """The input an overflowing expected time is blamed on: a segment's (``work_part_s`` and the checkpoint)
    expected time grows as ``e^((restart + segment) / MTBF)``, so the restart where it is the longer of the two, the
    checkpoint where it is most of a segment that is, else the MTBF (the work is the interval the user gave or
    Young's)."""
    if restart_s >= work_part_s + checkpoint_s:
        return "restart_s", restart_s
    if checkpoint_s > work_part_s:
        return "checkpoint_s", checkpoint_s
    return "mtbf_s", mtbf_s


def expected_run(work_s: float, *, interval_s: float, checkpoint_s: float, restart_s: float, mtbf_s: float) -> Goodput:
    """The expected wall time of ``work_s`` of work checkpointed every ``interval_s`` of work (a
    checkpoint after the last segment too)."""
    check_time_s("checkpoint_s", checkpoint_s, positive=False)
    check_time_s("restart_s", restart_s, positive=False)
    check_time_s("mtbf_s", mtbf_s)
    full, rest = segments(work_s, interval_s)
    total = full * segment_time_s(interval_s + checkpoint_s, mtbf_s, restart_s) if full else 0.0
    if rest:
        total += segment_time_s(rest + checkpoint_s, mtbf_s, restart_s)
    count = full + (1 if rest else 0)
    if not math.isfinite(total):
        work_part_s = interval_s if full else rest
        field, value = _overflow_cause(restart_s, checkpoint_s, work_part_s, mtbf_s)
        raise ClusterSimError(
            f"the run never finishes: a job MTBF of {format_seconds(mtbf_s)} against a restart of "
            f"{format_seconds(restart_s)} per failure and {count:,.4g} segments of "
            f"{format_seconds(work_part_s + checkpoint_s)} (work between checkpoints plus the checkpoint) put the "
            f"expected time to train beyond {sys.float_info.max:.3g} s; lower the failure rate or the node count, "
            "shorten the restart or the checkpoint, or lengthen the interval",
            field=field,
            value=value,
        )
    return Goodput(
        work_s=work_s, interval_s=interval_s, checkpoint_s=checkpoint_s, restart_s=restart_s, mtbf_s=mtbf_s,
        expected_time_s=total, num_checkpoints=count,
    )  # fmt: skip
