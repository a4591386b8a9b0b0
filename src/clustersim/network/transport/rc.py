"""An RC-like transport (InfiniBand's Reliable Connection, as RoCE NICs also run it).

One path per connection, chosen by an ECMP hash of the flow; packets (IB MTU 4 KiB) carry PSNs.
Loss recovery is one of two:

* ``go-back-n`` (older NICs, and the IB spec's baseline): the responder accepts only the next
  expected PSN; on a gap it sends one NAK and drops what follows; the requester goes back to the
  NAK's PSN and resends everything from there.
* ``selective`` (ConnectX-6 Dx/7 "selective repeat"): the responder keeps what arrives out of order
  and NAKs the first missing PSN once; the requester resends that packet alone and goes on. When the
  gap fills and another is behind it, the responder NAKs the next hole at once.

A cumulative acknowledgement (the next expected PSN) answers each packet accepted in order. When
nothing is acknowledged for the local ACK timeout, 4.096 us x 2^timeout, the requester goes back to
the first unacknowledged packet (both modes); after ``retry_count`` such timeouts in a row without
progress the queue pair goes to the error state and the flow fails (NCCL then aborts: "transport
retry counter exceeded"). With DCQCN (``dcqcn``) the requester paces its packets at the rate
``dcqcn.DcqcnRate`` keeps, and the responder answers an ECN-marked packet with a CNP.

Sources: InfiniBand Architecture Specification vol. 1, ch. 9.7 (PSNs, NAK sequence error, local ACK
timeout 4.096 us x 2^timeout, retry count); ns-3 RDMA model used by HPCC/SimAI (receiver NACK on
seq > expected, sender go-back-N); NVIDIA ConnectX-6 Dx/ConnectX-7 product briefs ("selective
repeat"); NCCL's defaults NCCL_IB_TIMEOUT=20 (4.096 us x 2^20 = 4.3 s) and NCCL_IB_RETRY_CNT=7
(NVIDIA/nccl src/transport/net_ib.cc: NCCL_PARAM(IbTimeout, "IB_TIMEOUT", 20), NCCL_PARAM(IbRetryCnt,
"IB_RETRY_CNT", 7); the user guide's environment-variable page, NCCL_IB_TIMEOUT and NCCL_IB_RETRY_CNT).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from clustersim.errors import ClusterSimError
from clustersim.network.transport.dcqcn import DcqcnParams, DcqcnRate
from clustersim.network.transport.engine import Event, ps
from clustersim.network.transport.flows import ACK, ACK_BYTES, CNP, DATA, NAK, TIMER_PRIORITY, MessageFlow
from clustersim.network.transport.links import ECN_BIT, Packet
from clustersim.network.transport.topology import Topology

IB_TIMEOUT_UNIT_S = 4.096e-6
NCCL_IB_TIMEOUT = 20  # NCCL's default local ACK timeout exponent (4.3 s)
NCCL_IB_RETRY_CNT = 7  # NCCL's default retry count
RECOVERIES = ("selective", "go-back-n")


@dataclass(frozen=True, slots=True)
class RcParams:
    """RC-like transport settings."""

    payload_bytes: int = 4096  # IB MTU
    header_bytes: int = 82  # RoCEv2 on Ethernet: framing 38 + IP 20 + UDP 8 + BTH 12 + ICRC 4
    timeout_exponent: int = NCCL_IB_TIMEOUT  # local ACK timeout = 4.096 us x 2^20 = 4.3 s
    window: int = 128  # packets outstanding (512 KiB)
    path: int | None = None  # the ECMP path; None = a hash of the flow
    recovery: str = "selective"  # or "go-back-n"
    retry_count: int = NCCL_IB_RETRY_CNT  # timeouts in a row without progress before the QP fails
    dcqcn: DcqcnParams | None = None  # DCQCN's rate control (RoCE); None: none
    outstanding: int = 1  # messages (work requests) in flight: 1 sends each after the previous completes

    def __post_init__(self) -> None:
        if not 0 <= self.timeout_exponent <= 31:
            raise ClusterSimError(
                f"timeout_exponent: {self.timeout_exponent} is not a 5-bit IB timeout (0..31)",
                field="timeout_exponent",
                value=self.timeout_exponent,
            )
        if self.recovery not in RECOVERIES:
            raise ClusterSimError(
                f"recovery: {self.recovery!r} is not one of {', '.join(RECOVERIES)}",
                field="recovery",
                value=self.recovery,
            )
        if not 0 <= self.retry_count <= 7:
            raise ClusterSimError(
                f"retry_count: {self.retry_count} is not a 3-bit IB retry count (0..7)",
                field="retry_count",
                value=self.retry_count,
            )
        for name in ("payload_bytes", "window", "outstanding"):
            if getattr(self, name) < 1:
                raise ClusterSimError(
                    f"{name}: {getattr(self, name)} must be at least 1", field=name, value=getattr(self, name)
                )

    @property
    def timeout_s(self) -> float:
        """The local ACK timeout."""
        return float(IB_TIMEOUT_UNIT_S * 2**self.timeout_exponent)


def ecmp_path(flow: int, num_paths: int, seed: int) -> int:
    """The equal-cost path a switch hash gives a flow (a fixed mix of flow id and seed)."""
    x = (flow * 0x9E3779B1 + seed * 0x85EBCA77 + 0x165667B1) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x2C1B3C6D) & 0xFFFFFFFF
    x ^= x >> 12
    return x % num_paths


class RcFlow(MessageFlow):
    """One RC-like queue pair: requester at ``src``, responder at ``dst``."""

    def __init__(
        self,
        topo: Topology,
        src: int,
        dst: int,
        message_bytes: Sequence[int],
        params: RcParams | None = None,
        *,
        start_ps: int = 0,
        seed: int = 0,
    ) -> None:
        self.params = params or RcParams()
        self.payload_bytes = self.params.payload_bytes
        self.header_bytes = self.params.header_bytes
        super().__init__(topo, src, dst, message_bytes, start_ps=start_ps)
        chosen = self.params.path if self.params.path is not None else ecmp_path(self.flow, len(self.routes), seed)
        self.path = chosen % len(self.routes)
        self.route = self.routes[self.path]
        self.back_route = self.back_routes[self.path % len(self.back_routes)]
        self.rto_ps = ps(self.params.timeout_s)
        self._ends: list[int] = []  # one past each message's last PSN
        self._tail_bytes: dict[int, int] = {}  # each message's last PSN -> its bytes on the wire
        for size in self.sizes:
            end = (self._ends[-1] if self._ends else 0) + self.num_packets(size)
            self._ends.append(end)
            self._tail_bytes[end - 1] = size - (self.num_packets(size) - 1) * self.payload_bytes + self.header_bytes
        self.selective = self.params.recovery == "selective"
        self.snd_una = 0
        self.snd_nxt = 0
        self.high_sent = 0
        self._deadline = 0
        self._timer_armed = False
        self._retries = 0  # timeouts in a row without progress
        self.epsn = 0
        self._nak_sent = False  # go-back-N: a NAK is out for this gap
        self._nak_for = -1  # selective repeat: the PSN last NAKed
        self._held: set[int] = set()  # selective repeat: PSNs kept beyond the first gap
        line = 8e12 / self.net.ps_per_byte[self.route[0]]
        self.rate = DcqcnRate(self.params.dcqcn, line) if self.params.dcqcn is not None else None
        self._next_tx_ps = 0  # the pacer lets the next packet go from here
        self._slot_ps, self._slot_wire = 0, 0  # the last paced packet's slot and its bytes on the wire
        self._pacer_at_ps: int | None = None  # when the armed pacer fires (None: not armed)
        self._rate_timer_armed = False
        self._rate_due_ps = 0
        self._last_cnp_ps: int | None = None
        self.cnps = 0
        self._full_bytes = self.payload_bytes + self.header_bytes  # a full packet on the wire
        self._outstanding, self._window, self._hop = self.params.outstanding, self.params.window, self.net.hop

    def post(self, now_ps: int) -> list[Event]:
        # with several messages outstanding, this one's packets may be out (or acknowledged) already
        self.snd_una = max(self.snd_una, self._base)
        self.snd_nxt = max(self.snd_nxt, self._base)
        if self.snd_una >= self._end:
            return list(self._complete(now_ps) or ())
        self._deadline = now_ps + self.rto_ps
        self._retries = 0
        return self._pump(now_ps)

    def _send(self, now_ps: int, seq: int) -> None:
        if seq < self.high_sent:
            self.retransmissions += 1
        else:
            self.high_sent = seq + 1
        wire = self._tail_bytes.get(seq, self._full_bytes)
        self._hop(now_ps, (self.flow, DATA, seq, wire, self.route, now_ps, 0))
        self.packets_sent += 1
        rate = self.rate
        if rate is not None:
            self._slot_ps, self._slot_wire = max(self._next_tx_ps, now_ps), wire
            self._next_tx_ps = self._slot_ps + rate.gap_ps(wire)
            if rate.rate < rate.line:  # below line rate: the byte counter counts
                before = rate.rate
                rate.on_sent(wire)
                if rate.rate > before:
                    self._repace()

    def _pump(self, now_ps: int) -> list[Event]:
        events: list[Event] = []
        last = min(self._message + self._outstanding, len(self.sizes)) - 1
        seq, limit = self.snd_nxt, min(self._ends[last], self.snd_una + self._window)
        paced = self.rate is not None
        while seq < limit:
            if paced and self._next_tx_ps > now_ps:
                if self._pacer_at_ps is None or self._pacer_at_ps > self._next_tx_ps:
                    self._pacer_at_ps = self._next_tx_ps
                    events.append((self._next_tx_ps, 0, self._paced, None))
                break
            self._send(now_ps, seq)
            seq += 1
        self.snd_nxt = seq
        if not self._timer_armed and self.snd_una < self._end:
            self._timer_armed = True
            events.append((self._deadline, TIMER_PRIORITY, self._timer, None))
        return events

    def _repace(self) -> None:
        """The rate rose: the last paced packet's gap shrinks to the new rate's (a NIC's rate limiter
        applies a new rate at once; the packet waiting for the pacer need not wait out the old gap)."""
        assert self.rate is not None
        self._next_tx_ps = min(self._next_tx_ps, self._slot_ps + self.rate.gap_ps(self._slot_wire))

    def _paced(self, now_ps: int, _: object) -> list[Event] | None:
        if now_ps != self._pacer_at_ps:
            return None  # a pacer the rate's rise brought forward has fired already
        self._pacer_at_ps = None
        if self.done_ps is not None or self.failure is not None:
            return None
        return self._pump(now_ps)

    def on_control(self, now_ps: int, packet: Packet) -> list[Event] | None:
        if self.done_ps is not None or self.failure is not None:
            return None  # a late acknowledgement after the last message
        kind, psn = packet[1], packet[2]
        if kind == CNP:
            return self._on_cnp(now_ps)
        if psn > self.snd_una:
            self.snd_una = psn
            self._deadline = now_ps + self.rto_ps
            self._retries = 0
        if kind == NAK and psn >= self.snd_una:
            if self.selective:
                if psn < self.snd_nxt:
                    self._send(now_ps, psn)  # the hole alone
            else:
                self.snd_nxt = psn  # go back N
        if self.snd_una >= self._end:
            return list(self._complete(now_ps) or ())
        return self._pump(now_ps)

    def _on_cnp(self, now_ps: int) -> list[Event] | None:
        assert self.rate is not None
        if not self.rate.on_cnp(now_ps):
            return None
        self._rate_due_ps = now_ps + ps(self.rate.params.time_reset_s)  # a cut restarts the increase timer
        if self._rate_timer_armed:
            return None
        self._rate_timer_armed = True
        return [(self._rate_due_ps, TIMER_PRIORITY, self._rate_timer, None)]

    def _rate_timer(self, now_ps: int, _: object) -> list[Event] | None:
        """DCQCN's rate-increase timer: one stage every time_reset_s after the last cut, while below line rate."""
        assert self.rate is not None
        if self.done_ps is not None or self.failure is not None or self.rate.at_line_rate:
            self._rate_timer_armed = False
            return None
        events: list[Event] = []
        if now_ps >= self._rate_due_ps:
            self.rate.on_timer()
            self._rate_due_ps = now_ps + ps(self.rate.params.time_reset_s)
            self._repace()
            if self._pacer_at_ps is not None and self._pacer_at_ps > max(now_ps, self._next_tx_ps):
                self._pacer_at_ps = max(now_ps, self._next_tx_ps)  # the waiting packet goes earlier
                events.append((self._pacer_at_ps, 0, self._paced, None))
        events.append((self._rate_due_ps, TIMER_PRIORITY, self._rate_timer, None))
        return events

    def _timer(self, now_ps: int, _: object) -> list[Event] | None:
        self._timer_armed = False
        if self.snd_una >= self._end or self._message >= len(self.sizes) or self.failure is not None:
            return None
        if now_ps < self._deadline:
            self._timer_armed = True
            return [(self._deadline, TIMER_PRIORITY, self._timer, None)]
        self.timeouts += 1
        self._retries += 1
        if self._retries > self.params.retry_count:
            self.failure = (
                f"rc: queue pair {self.flow} went to the error state: {self._retries} local ACK timeouts of "
                f"{self.params.timeout_s:.4g} s in a row at PSN {self.snd_una} (retry count {self.params.retry_count})"
            )
            return None
        self.snd_nxt = self.snd_una
        self._deadline = now_ps + self.rto_ps
        return self._pump(now_ps)

    def on_data(self, now_ps: int, packet: Packet) -> list[Event] | None:
        seq, stamp = packet[2], packet[5]
        if self.rate is not None and packet[6] & ECN_BIT:
            self._notify(now_ps, stamp)
        kind = self._accept_selective(seq) if self.selective else self._accept_go_back(seq)
        if kind is not None:
            self._hop(now_ps, (self.flow, kind, self.epsn, ACK_BYTES, self.back_route, stamp, 0))
        return None  # a route has ports: the hop schedules its own event

    def _notify(self, now_ps: int, stamp: int) -> None:
        """The notification point: a CNP for a marked packet, at most one per cnp_interval_s."""
        assert self.rate is not None
        gap = ps(self.rate.params.cnp_interval_s)
        if self._last_cnp_ps is not None and now_ps - self._last_cnp_ps < gap:
            return
        self._last_cnp_ps = now_ps
        self.cnps += 1
        self.net.hop(now_ps, (self.flow, CNP, self.epsn, ACK_BYTES, self.back_route, stamp, 0))

    def _accept_go_back(self, seq: int) -> int | None:
        if seq == self.epsn:
            self.epsn += 1
            self._nak_sent = False
            return ACK
        if seq > self.epsn:
            if self._nak_sent:
                return None
            self._nak_sent = True
            return NAK
        return ACK  # a duplicate: acknowledge again

    def _accept_selective(self, seq: int) -> int | None:
        held = self._held
        if seq == self.epsn:
            self.epsn += 1
            while self.epsn in held:
                held.remove(self.epsn)
                self.epsn += 1
            if held and self._nak_for != self.epsn:
                self._nak_for = self.epsn  # the next hole, at once
                return NAK
            return ACK
        if seq > self.epsn:
            held.add(seq)
            if self._nak_for != self.epsn:
                self._nak_for = self.epsn
                return NAK
            return None
        return ACK  # a duplicate: acknowledge again
