"""DCQCN's reaction point: the sending NIC's rate machine for one RoCE queue pair.

The switch marks (``lossless.LosslessSpec.ecn``), the receiving NIC answers a marked packet with a
congestion notification (CNP) and the sender cuts its rate: the current rate falls by ``alpha / 2``
and ``alpha`` (the congestion estimate) rises by ``g``, at most once per ``reduce_period_s``.
The target takes the current rate only when the last increase came from the timer (ConnectX's
clamp_tgt_rate off, clamp_tgt_rate_after_time_inc on; the paper sets it at every cut, ``clamp_target``).
Without CNPs ``alpha`` decays by ``1 - g`` every ``alpha_period_s`` and the rate climbs back in
stages counted by a timer (``time_reset_s``) and a byte counter (``byte_reset_bytes``): fast recovery
(current rate halfway to the target) while both counts are below ``threshold``, additive increase
(target + ``ai``) when one is, hyper increase (target + i x ``hai``) when both are past it.

Sources: Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015 (the
algorithm: Fig. 8 and sec. 5); the constants are NVIDIA ConnectX's defaults (the NVIDIA community
page "DCQCN parameters", as google/isekai rdma_roce_cc_dcqcn.h records them: dce_alpha_g 1019/1024,
alpha update period 1 us, initial alpha 1023/1024, rpg_time_reset 300 us, rpg_byte_reset 32767,
rpg_threshold 1, rpg_ai_rate 5 Mbit/s, rpg_hai_rate 50 Mbit/s, rpg_min_rate 1 Mbit/s, rate reduce
monitor period 4 us). The notification point sends at most one CNP per queue pair every 50 us (the
paper's N). The kernel's np_min_time_between_cnps debug parameter defaults to 0 (linux commit "IB/mlx5:
Add np_min_time_between_cnps and rp_max_rate debug params", 2020), but with a CNP for every marked
packet the reaction point cuts every 4 us for as long as a full window takes to drain (~300 us in an
8-to-1 incast) and rates fall to Mbit/s: the 8 x 1 MiB incast then takes 13-34 ms instead of 0.7.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from clustersim.errors import ClusterSimError
from clustersim.network.transport.engine import ps


@dataclass(frozen=True, slots=True)
class DcqcnParams:
    """Reaction- and notification-point settings (NVIDIA ConnectX defaults; see the module's text)."""

    g: float = 5 / 1024  # alpha gain: alpha x 1019/1024 per period (dce_alpha_g 1019)
    alpha_period_s: float = 1e-6
    initial_alpha: float = 1023 / 1024
    time_reset_s: float = 300e-6  # rate-increase timer
    byte_reset_bytes: int = 32767  # rate-increase byte counter
    threshold: int = 1  # F: stages of fast recovery
    ai_bits_per_s: float = 5e6
    hai_bits_per_s: float = 50e6
    min_rate_bits_per_s: float = 1e6
    reduce_period_s: float = 4e-6  # at most one cut per period
    cnp_interval_s: float = 50e-6  # the receiver's least gap between two CNPs of a QP (the paper's N)
    clamp_target: bool = False  # clamp_tgt_rate: every cut sets the target to the current rate (the paper's rule)
    clamp_target_after_timer: bool = True  # clamp_tgt_rate_after_time_inc: a cut after a timer increase does

    def __post_init__(self) -> None:
        checks = (
            ("g", 0 < self.g < 1, "in (0, 1)"),
            ("alpha_period_s", self.alpha_period_s > 0, "> 0 s"),
            ("initial_alpha", 0 <= self.initial_alpha <= 1, "in [0, 1]"),
            ("time_reset_s", self.time_reset_s > 0, "> 0 s"),
            ("byte_reset_bytes", self.byte_reset_bytes >= 1, "at least 1 byte"),
            ("threshold", self.threshold >= 0, "0 or more"),
            ("min_rate_bits_per_s", self.min_rate_bits_per_s > 0, "> 0"),
            ("cnp_interval_s", self.cnp_interval_s >= 0, ">= 0 s"),
        )
        for name, ok, valid in checks:
            if not ok:
                value = getattr(self, name)
                raise ClusterSimError(
                    f"dcqcn {name}: {value!r} is out of range (valid: {valid})", field=name, value=value
                )


class DcqcnRate:
    """One queue pair's sending rate under DCQCN, from ``line_bits_per_s`` down."""

    def __init__(self, params: DcqcnParams, line_bits_per_s: float) -> None:
        self.params = params
        self.line = line_bits_per_s
        self.rate = line_bits_per_s  # current rate, Rc
        self.target = line_bits_per_s  # target rate, Rt
        self.alpha = params.initial_alpha
        self._alpha_at_ps = 0
        self._period_ps = ps(params.alpha_period_s)
        self._last_cut_ps: int | None = None
        self._reduce_ps = ps(params.reduce_period_s)
        self.timer_count = 0
        self.byte_count = 0
        self._bytes = 0
        self.cuts = 0
        self._timer_raised = False  # the last increase came from the timer

    @property
    def at_line_rate(self) -> bool:
        """Back at full speed: nothing left to recover."""
        return self.rate >= self.line

    def _decay(self, now_ps: int) -> None:
        periods = (now_ps - self._alpha_at_ps) // self._period_ps
        if periods > 0:
            self.alpha *= (1 - self.params.g) ** periods
            self._alpha_at_ps += periods * self._period_ps

    def on_cnp(self, now_ps: int) -> bool:
        """A congestion notification: cut (at most once per reduce period); True if the rate fell."""
        self._decay(now_ps)
        self.alpha = (1 - self.params.g) * self.alpha + self.params.g
        if self._last_cut_ps is not None and now_ps - self._last_cut_ps < self._reduce_ps:
            return False
        self._last_cut_ps = now_ps
        if self.params.clamp_target or (self.params.clamp_target_after_timer and self._timer_raised):
            self.target = self.rate
        self._timer_raised = False
        self.rate = max(self.params.min_rate_bits_per_s, self.rate * (1 - self.alpha / 2))
        self.timer_count = self.byte_count = self._bytes = 0
        self.cuts += 1
        return True

    def on_sent(self, wire_bytes: int) -> None:
        """Bytes sent: every ``byte_reset_bytes`` of them is one stage of the byte counter."""
        if self.at_line_rate:
            return
        self._bytes += wire_bytes
        while self._bytes >= self.params.byte_reset_bytes and not self.at_line_rate:
            self._bytes -= self.params.byte_reset_bytes
            self.byte_count += 1
            self._increase()

    def on_timer(self) -> None:
        """The rate-increase timer expired: one stage of the timer."""
        self.timer_count += 1
        self._timer_raised = True
        self._increase()

    def _increase(self) -> None:
        f = self.params.threshold
        low, high = min(self.timer_count, self.byte_count), max(self.timer_count, self.byte_count)
        if high < f:
            pass  # fast recovery: towards the target only
        elif low > f:
            self.target += (low - f) * self.params.hai_bits_per_s
        else:
            self.target += self.params.ai_bits_per_s
        self.target = min(self.target, self.line)
        self.rate = min(self.line, (self.target + self.rate) / 2)
        if self.line - self.rate < 1e-3 * self.line:  # within 0.1%: back at line rate
            self.rate = self.line

    def gap_ps(self, wire_bytes: int) -> int:
        """The pacing gap after a packet of ``wire_bytes`` at the current rate."""
        return math.ceil(wire_bytes * 8e12 / self.rate)
