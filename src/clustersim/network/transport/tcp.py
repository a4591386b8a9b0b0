"""A TCP-like transport: one path, NewReno or CUBIC congestion control, kernel costs on the host.

Slow start from an initial window of 10 segments (RFC 6928), congestion avoidance (+1 segment per
round trip), fast retransmit after three duplicate ACKs and NewReno fast recovery (RFC 6582: a partial
ACK resends the next hole; ``_may_fast_retransmit`` says when three duplicate ACKs start it), and a
retransmission timeout of max(min_rto, srtt + 4 rttvar) that backs off by doubling (RFC 6298; Linux's
minimum is 200 ms). The receiver keeps out-of-order segments and
acknowledges every segment cumulatively. With ``congestion="cubic"`` congestion avoidance and the
reduction on loss follow CUBIC (RFC 9438, cubic.py) instead; slow start and recovery are the same.
The kernel's costs ride on the topology's host stack ports (a cost per packet at each end, data and
ACKs) plus one send system call per message.

Sources: RFC 5681, 6582, 6298, 6928; Linux TCP_RTO_MIN = HZ/5 (include/net/tcp.h).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from clustersim.errors import ClusterSimError
from clustersim.network.transport.cubic import Cubic
from clustersim.network.transport.engine import Event, ps
from clustersim.network.transport.flows import ACK, ACK_BYTES, DATA, TIMER_PRIORITY, MessageFlow
from clustersim.network.transport.links import Packet
from clustersim.network.transport.topology import Topology

MAX_RTO_S = 120.0  # Linux TCP_RTO_MAX
CONGESTION_CONTROLS = ("newreno", "cubic")
# Loss recovery: NewReno without SACK (RFC 6582, this module); SACK with PRR and duplicate-threshold
# detection (RFC 6675, 6937: ns-3's default); SACK with PRR and RACK-TLP (RFC 8985: Linux's default)
RECOVERIES = ("newreno", "sack", "rack")
# What a loss reduction scales, with a SACK scoreboard: the window at the loss (Linux's tcp_reno_ssthresh and
# CUBIC's bictcp_recalc_ssthresh; ns-3's TcpCubic) or RFC 6675's pipe, the data still in the network, which
# leaves out the segments SACKed and deemed lost (ns-3's TcpNewReno halves BytesInFlight, that pipe)
REDUCTION_BASES = ("cwnd", "pipe")


@dataclass(frozen=True, slots=True)
class TcpParams:
    """TCP-like transport settings."""

    payload_bytes: int = 8949  # MSS at EC2's 9001-byte MTU with TCP timestamps
    header_bytes: int = 90  # Ethernet framing 38 + IP 20 + TCP 20 + timestamps 12
    initial_window: int = 10  # RFC 6928
    min_rto_s: float = 0.2  # Linux TCP_RTO_MIN
    initial_rto_s: float = 0.2  # an established connection: the handshake gave an RTT sample, so min_rto
    syscall_s: float = 0.0  # one send() per message (the data-path model supplies it)
    max_window: int = 4096  # segments (receive window / buffer cap)
    path: int | None = None  # the ECMP path; None = a hash of the flow
    congestion: str = "cubic"  # Linux's default (RFC 9438), or "newreno"
    recovery: str = "rack"  # Linux's default: SACK, PRR and RACK-TLP; or "sack" or "newreno" (see RECOVERIES)
    reduction_basis: str = "cwnd"  # Linux's; "pipe" as ns-3's NewReno (see REDUCTION_BASES; SACK recoveries only)

    def __post_init__(self) -> None:
        for name, valid in (
            ("congestion", CONGESTION_CONTROLS),
            ("recovery", RECOVERIES),
            ("reduction_basis", REDUCTION_BASES),
        ):
            if getattr(self, name) not in valid:
                raise ClusterSimError(
                    f"{name}: {getattr(self, name)!r} is not one of {', '.join(valid)}",
                    field=name,
                    value=getattr(self, name),
                )
        for name in ("payload_bytes", "initial_window", "max_window"):
            if getattr(self, name) < 1:
                raise ClusterSimError(
                    f"{name}: {getattr(self, name)} must be at least 1", field=name, value=getattr(self, name)
                )
        if self.reduction_basis == "pipe" and self.recovery == "newreno":
            raise ClusterSimError(
                "reduction_basis: 'pipe' needs a SACK scoreboard (recovery sack or rack), not recovery newreno",
                field="reduction_basis",
                value=self.reduction_basis,
            )
        if not self.min_rto_s > 0:
            raise ClusterSimError(
                f"min_rto_s: {self.min_rto_s!r} must be > 0 s", field="min_rto_s", value=self.min_rto_s
            )


class TcpFlow(MessageFlow):
    """One TCP-like connection from ``src`` to ``dst`` recovering as NewReno (``tcp_sack.tcp_flow``
    makes the connection that ``params.recovery`` names)."""

    recoveries: tuple[str, ...] = ("newreno",)

    def __init__(
        self,
        topo: Topology,
        src: int,
        dst: int,
        message_bytes: Sequence[int],
        params: TcpParams | None = None,
        *,
        start_ps: int = 0,
        seed: int = 0,
    ) -> None:
        from clustersim.network.transport.rc import ecmp_path

        self.params = params or TcpParams(recovery=self.recoveries[0])
        if self.params.recovery not in self.recoveries:
            raise ClusterSimError(
                f"recovery: {self.params.recovery!r} is not run by {type(self).__name__} "
                f"({', '.join(self.recoveries)}); tcp_sack.tcp_flow picks the connection for it",
                field="recovery",
                value=self.params.recovery,
            )
        self.payload_bytes = self.params.payload_bytes
        self.header_bytes = self.params.header_bytes
        super().__init__(topo, src, dst, message_bytes, start_ps=start_ps)
        chosen = self.params.path if self.params.path is not None else ecmp_path(self.flow, len(self.routes), seed + 1)
        self.path = chosen % len(self.routes)
        self.route = self.routes[self.path]
        self.back_route = self.back_routes[self.path % len(self.back_routes)]
        self.cwnd = float(self.params.initial_window)
        self.ssthresh = float("inf")
        self.snd_una = self.snd_nxt = self.high_sent = 0
        self.dupacks = 0
        # RFC 6582's "recover": the highest segment sent when the last recovery or timeout began; at first
        # "the initial send sequence number", -1 here (the first data segment is 0)
        self.recover = -1
        self.highest_ack = self.prev_highest_ack = 0  # the last two cumulative ACKs (RFC 6582 section 4.1)
        self.in_recovery = False
        self.srtt_ps = 0.0
        self.rttvar_ps = 0.0
        self.min_rto_ps = ps(self.params.min_rto_s)
        self.rto_ps = ps(self.params.initial_rto_s)
        self.syscall_ps = ps(self.params.syscall_s)
        self._deadline = 0
        self._timer_armed = False
        self.rcv_nxt = 0
        self._ooo: set[int] = set()
        self.cubic = Cubic() if self.params.congestion == "cubic" else None

    def post(self, now_ps: int) -> list[Event]:
        self.snd_una = self.snd_nxt = self._base
        if self.syscall_ps:
            return [(now_ps + self.syscall_ps, 0, self._after_syscall, None)]
        return self._after_syscall(now_ps, None)

    def _after_syscall(self, now_ps: int, _: object) -> list[Event]:
        self._deadline = now_ps + self.rto_ps
        return self._pump(now_ps)

    def _send(self, now_ps: int, seq: int, events: list[Event]) -> None:
        if seq < self.high_sent:
            self.retransmissions += 1
        else:
            self.high_sent = seq + 1
        size = self.payload_bytes + self.header_bytes if seq < self._end - 1 else self.wire_bytes(seq)
        self.net.hop(now_ps, (self.flow, DATA, seq, size, self.route, now_ps, 0))  # schedules its own event
        self.packets_sent += 1

    def _pump(self, now_ps: int) -> list[Event]:
        events: list[Event] = []
        window = min(self.cwnd, float(self.params.max_window))
        while self.snd_nxt < self._end and self.snd_nxt - self.snd_una < window:
            self._send(now_ps, self.snd_nxt, events)
            self.snd_nxt += 1
        if not self._timer_armed and self.snd_una < self._end:
            self._timer_armed = True
            events.append((self._deadline, TIMER_PRIORITY, self._timer, None))
        return events

    def _on_rtt(self, rtt_ps: int) -> None:
        if self.srtt_ps == 0:
            self.srtt_ps, self.rttvar_ps = float(rtt_ps), rtt_ps / 2
        else:
            self.rttvar_ps += (abs(self.srtt_ps - rtt_ps) - self.rttvar_ps) / 4
            self.srtt_ps += (rtt_ps - self.srtt_ps) / 8
        self.rto_ps = max(self.min_rto_ps, int(self.srtt_ps + 4 * self.rttvar_ps))

    def _reduced(self, flight: int) -> float:
        """The slow-start threshold after a loss with ``flight`` segments out (RFC 5681: half of it;
        CUBIC: beta of it, and the window at the loss remembered)."""
        if self.cubic is not None:
            return self.cubic.on_loss(self.cwnd, flight)
        return max(flight / 2, 2.0)

    def _grow(self, acked: int, now_ps: int) -> None:
        """Open the window for ``acked`` segments acknowledged outside recovery: slow start below
        ssthresh, then congestion avoidance (NewReno's one segment per window, or CUBIC's curve)."""
        if self.cwnd < self.ssthresh:
            self.cwnd += acked
        elif self.cubic is not None:
            self.cwnd = self.cubic.on_ack(self.cwnd, now_ps / 1e12, self.srtt_ps / 1e12, acked)
        else:
            self.cwnd += acked / self.cwnd

    def _may_fast_retransmit(self, ack: int) -> bool:
        """Whether the third duplicate ACK of ``ack`` starts a fast retransmit (RFC 6582).

        Section 3.2, step 2: only if "the Cumulative Acknowledgment field covers more than recover",
        ``recover`` being "the highest sequence number transmitted" when the last recovery or timeout
        began, and an ACK covers more than recover when ``ack_number - 1 > recover`` (same section;
        here in segments: ``ack`` is the next segment expected, ``recover`` the highest segment sent).
        Duplicate ACKs of exactly ``recover + 1`` (every segment up to recover acknowledged, nothing
        beyond) are ambiguous without SACK (section 4): a segment sent after it was lost, or segments
        resent needlessly after a timeout arrived twice. Section 4.1's ACK heuristic, which a sender
        MAY use, settles it: "check to see if the congestion window is greater than SMSS bytes and
        the difference between highest_ack and prev_highest_ack is at most 4*SMSS bytes. If true,
        duplicate ACKs indicate a lost segment (enter fast retransmit)" (needless resends after a
        timeout move the cumulative ACK by more, and just after one the window is a segment). Else
        the retransmission timer is the backup, as the RFC says."""
        if ack - 1 > self.recover:
            return True
        return self.cwnd > 1 and self.highest_ack - self.prev_highest_ack <= 4

    def on_control(self, now_ps: int, packet: Packet) -> list[Event] | None:
        if self.done_ps is not None:
            return None  # a late acknowledgement after the last message
        ack, stamp = packet[2], packet[5]
        events: list[Event] = []
        if ack > self.snd_una:
            acked = ack - self.snd_una
            self.prev_highest_ack, self.highest_ack = self.snd_una, ack
            self._on_rtt(now_ps - stamp)
            self.snd_una = ack
            self.snd_nxt = max(self.snd_nxt, ack)
            self._deadline = now_ps + self.rto_ps
            self.dupacks = 0
            if self.in_recovery:
                if ack > self.recover:  # a full ACK: "all of the data up to and including recover"
                    self.in_recovery = False
                    self.cwnd = self.ssthresh
                else:  # partial ACK: resend the next hole, deflate
                    self._send(now_ps, ack, events)
                    self.cwnd = max(self.cwnd - acked + 1, 1.0)
            else:
                self._grow(acked, now_ps)
            if self.snd_una >= self._end:
                return list(self._complete(now_ps) or ())
        elif ack == self.snd_una and self.snd_una < self.snd_nxt:
            self.dupacks += 1
            if self.dupacks == 3 and not self.in_recovery and self._may_fast_retransmit(ack):
                self.ssthresh = self._reduced(self.snd_nxt - self.snd_una)
                self.recover = self.high_sent - 1
                self.in_recovery = True
                self._send(now_ps, ack, events)
                self.cwnd = self.ssthresh + 3
            elif self.in_recovery:
                self.cwnd += 1
        events.extend(self._pump(now_ps))
        return events

    def _timer(self, now_ps: int, _: object) -> list[Event] | None:
        self._timer_armed = False
        if self.snd_una >= self._end or self._message >= len(self.sizes):
            return None
        if now_ps < self._deadline:
            self._timer_armed = True
            return [(self._deadline, TIMER_PRIORITY, self._timer, None)]
        self.timeouts += 1
        return self._on_timeout(now_ps)

    def _on_timeout(self, now_ps: int) -> list[Event]:
        """The retransmission timer fired: NewReno goes back to the first unacknowledged segment."""
        self.ssthresh = self._reduced(self.snd_nxt - self.snd_una)
        self.cwnd = 1.0
        self.in_recovery = False
        self.dupacks = 0
        self.recover = self.high_sent - 1  # RFC 6582 section 3.2 step 4: "the highest sequence number transmitted"
        self.snd_nxt = self.snd_una
        self.rto_ps = min(2 * self.rto_ps, ps(MAX_RTO_S))
        self._deadline = now_ps + self.rto_ps
        return self._pump(now_ps)

    def on_data(self, now_ps: int, packet: Packet) -> list[Event] | None:
        seq, stamp = packet[2], packet[5]
        sack = 0  # the first SACK block: the segment that triggered this ACK, plus one, when above the cumulative point
        if seq == self.rcv_nxt:
            self.rcv_nxt += 1
            while self.rcv_nxt in self._ooo:
                self._ooo.discard(self.rcv_nxt)
                self.rcv_nxt += 1
        elif seq > self.rcv_nxt:
            self._ooo.add(seq)
            sack = seq + 1
        self.net.hop(now_ps, (self.flow, ACK, self.rcv_nxt, ACK_BYTES, self.back_route, stamp, sack))
        return None  # a route has ports: the hop schedules its own event
