"""DCQCN's reaction point: the sending NIC's rate machine for one RoCE queue pair.

The switch marks (``lossless.LosslessSpec.ecn``), the receiving NIC answers a marked packet with a
congestion notification (CNP) and the sender cuts its rate: the current rate falls by ``alpha / 2``
and ``alpha`` (the congestion estimate) rises by ``g``, at most once per ``reduce_period_s``.
The target takes the current rate at a cut when the rate rose since the last one (ConnectX:
clamp_tgt_rate off, clamp_tgt_rate_after_time_inc on; the paper sets it at every cut, ``clamp_target``).
Without CNPs ``alpha`` decays by ``1 - g`` every ``alpha_period_s`` and the rate climbs back in
stages counted by a timer (``time_reset_s``) and a byte counter (``byte_reset_bytes``), each stage
taking the current rate halfway to the target: fast recovery while both counts are below
``threshold``, then additive increase (target + ``ai``) and, once both are past it, hyper increase
(target + ``hai``; the paper adds i x ``hai``).

Sources: Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015 (the
algorithm: Fig. 8 and sec. 5). The constants are NVIDIA ConnectX's defaults (the NVIDIA community page
"DCQCN parameters", as google/isekai host/rdma/rdma_roce_cc_dcqcn.h records them and its .cc reads them:
dce_alpha_g 1019/1024 per 1 us, initial alpha 1023/1024, rpg_time_reset 300 us, rpg_byte_reset 32767
x 64 B, rpg_threshold 1, rpg_ai_rate 5 Mbit/s, rpg_hai_rate 50 Mbit/s, rpg_min_rate 1 Mbit/s, rate
reduce monitor period 4 us, clamp_tgt_rate off, clamp_tgt_rate_after_time_inc on) and the kernel's
np_min_time_between_cnps default of 0 us (linux commit "IB/mlx5: Add np_min_time_between_cnps and
rp_max_rate debug params", 2020): a CNP answers every marked packet and the reaction point cuts at
most once per 4 us. NVIDIA's DOCA documentation lists the same defaults ("DCQCN CC Parameters",
https://networking-docs.nvidia.com/doca/archive/3-4-0/dcqcn-cc-parameters: dce_tcp_g 1019, dce_tcp_rtt 1 us,
initial_alpha_value 1023, rpg_min_rate 1 Mb/s, 4 us between rate reductions, rpg_min_dec_fac 50 %, rpg_gd
11: a cut is alpha / 2; tests/network/transport/test_dcqcn.py holds them). A rate rise applies to the packet
waiting for the pacer at once (``rc.RcFlow._repace``), as a NIC's rate limiter does. (The paper's N = 50 us
between CNPs leaves alpha, which decays every microsecond, near 0.02: cuts of ~1% and PFC, not DCQCN,
then holds the queue.)
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from clustersim.errors import ClusterSimError
from clustersim.network.transport.engine import ps


@dataclass(frozen=True, slots=True)
class DcqcnParams:
    """Reaction- and notification-point settings: NVIDIA ConnectX's defaults (see the module's text)."""

    g: float = 5 / 1024  # alpha gain: alpha x 1019/1024 per period (dce_alpha_g 1019)
    alpha_period_s: float = 1e-6  # dce_alpha_update_period
    initial_alpha: float = 1023 / 1024
    time_reset_s: float = 300e-6  # rate-increase timer (rpg_time_reset)
    byte_reset_bytes: int = 32767 * 64  # rate-increase byte counter (rpg_byte_reset, in 64-byte units)
    threshold: int = 1  # F: stages before additive increase (rpg_threshold)
    ai_bits_per_s: float = 5e6  # rpg_ai_rate
    hai_bits_per_s: float = 50e6  # rpg_hai_rate
    min_rate_bits_per_s: float = 1e6  # rpg_min_rate
    reduce_period_s: float = 4e-6  # at most one cut per period (rate_reduce_monitor_period)
    cnp_interval_s: float = 0.0  # the receiver's least gap between two CNPs of a QP (np_min_time_between_cnps)
    clamp_target: bool = False  # clamp_tgt_rate: every cut sets the target to the current rate (the paper's rule)
    clamp_target_after_timer: bool = True  # clamp_tgt_rate_after_time_inc

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
        raised_by_timer = self.params.clamp_target_after_timer and self.timer_count > 0
        if self.params.clamp_target or self.byte_count > 0 or raised_by_timer:
            self.target = self.rate  # not on a cut that follows a cut with no increase between
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
            self._increase()
            self.byte_count += 1

    def on_timer(self) -> None:
        """The rate-increase timer expired: one stage of the timer."""
        self._increase()
        self.timer_count += 1

    def _increase(self) -> None:
        f = self.params.threshold
        low, high = min(self.timer_count, self.byte_count), max(self.timer_count, self.byte_count)
        if low > f:
            self.target += self.params.hai_bits_per_s  # hyper increase
        elif high >= f:
            self.target += self.params.ai_bits_per_s  # additive increase
        # else fast recovery: towards the target only
        self.target = min(self.target, self.line)
        self.rate = min(self.line, (self.target + self.rate) / 2)
        if self.line - self.rate < 1e-3 * self.line:  # within 0.1%: back at line rate
            self.rate = self.line

    def gap_ps(self, wire_bytes: int) -> int:
        """The pacing gap after a packet of ``wire_bytes`` at the current rate."""
        return ceil(wire_bytes * 8e12 / self.rate)
