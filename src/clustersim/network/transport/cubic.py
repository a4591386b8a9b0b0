"""CUBIC congestion avoidance (RFC 9438), the Linux default, for the TCP-like transport.

After a reduction the window follows ``W_cubic(t) = C (t - K)^3 + W_max`` from the start of the epoch
(``t`` in seconds, windows in segments): concave up to the window at the last loss ``W_max``, which it
reaches at ``K = cbrt((W_max - cwnd_epoch) / C)``, then convex beyond it. Each ACK moves the window
toward ``W_cubic(t + RTT)`` (clamped to [cwnd, 1.5 cwnd]) by ``(target - cwnd) / cwnd`` per segment
acknowledged, and never below the Reno-friendly estimate ``W_est``, which grows by
``alpha = 3 (1 - beta) / (1 + beta)`` segments per window acknowledged (at data-centre round trips
CUBIC mostly runs there). On loss, ``ssthresh = beta x flight`` with ``beta = 0.7`` and fast convergence
lowers ``W_max`` when the window is below the previous one.

Source: RFC 9438 (CUBIC for Fast and Long-Distance Networks, 2023), sections 4.2 to 4.7; C = 0.4 and
beta = 0.7 as there and in Linux's tcp_cubic.c.
"""

from __future__ import annotations

CUBIC_C = 0.4  # segments / s^3
CUBIC_BETA = 0.7  # the window's multiplicative decrease
CUBIC_ALPHA = 3 * (1 - CUBIC_BETA) / (1 + CUBIC_BETA)  # the Reno-friendly additive increase per RTT


class Cubic:
    """The window growth of one CUBIC sender between losses, and its reaction to a loss."""

    __slots__ = ("epoch_start_s", "k_s", "w_est", "w_max")

    def __init__(self) -> None:
        self.w_max = 0.0  # the window at the last loss, segments
        self.epoch_start_s: float | None = None  # when congestion avoidance began after it
        self.k_s = 0.0
        self.w_est = 0.0

    def window(self, t_s: float) -> float:
        """``W_cubic`` at ``t_s`` seconds into the epoch."""
        return CUBIC_C * (t_s - self.k_s) ** 3 + self.w_max

    def on_ack(self, cwnd: float, now_s: float, rtt_s: float, acked: int) -> float:
        """The window after ``acked`` segments are acknowledged at ``now_s`` in congestion avoidance."""
        if self.epoch_start_s is None:
            self.epoch_start_s = now_s
            if cwnd < self.w_max:
                self.k_s = ((self.w_max - cwnd) / CUBIC_C) ** (1 / 3)
            else:
                self.k_s = 0.0
                self.w_max = cwnd
            self.w_est = cwnd
        t = now_s - self.epoch_start_s
        target = min(max(self.window(t + rtt_s), cwnd), 1.5 * cwnd)
        self.w_est += CUBIC_ALPHA * acked / cwnd
        if self.window(t) < self.w_est:
            return max(cwnd, self.w_est)
        return cwnd + (target - cwnd) * acked / cwnd

    def on_loss(self, cwnd: float, flight: float) -> float:
        """A loss (three duplicate ACKs or a timeout) with ``cwnd`` and ``flight`` segments: record
        ``W_max`` (with fast convergence), end the epoch; returns the new ssthresh."""
        self.w_max = cwnd * (1 + CUBIC_BETA) / 2 if cwnd < self.w_max else cwnd
        self.epoch_start_s = None
        return max(flight * CUBIC_BETA, 2.0)
