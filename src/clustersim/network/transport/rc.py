"""An RC-like transport (InfiniBand's Reliable Connection, as RoCE NICs also run it).

One path per connection, chosen by an ECMP hash of the flow; packets (IB MTU 4 KiB) go in order and
the responder accepts only the next expected one (PSN). On a gap it sends one NAK and drops what
follows; the requester goes back to the NAK's PSN and resends everything from there (go-back-N). A
cumulative acknowledgement comes back for each packet accepted. When nothing is acknowledged for the
local ACK timeout, 4.096 us x 2^timeout, the requester goes back to the first unacknowledged packet.

Sources: InfiniBand Architecture Specification vol. 1, ch. 9.7 (PSNs, NAK sequence error, local ACK
timeout 4.096 us x 2^timeout); ns-3 RDMA model used by HPCC/SimAI (receiver NACK on seq > expected,
sender go-back-N); perftest's default timeout exponent 14 (NCCL's NCCL_IB_TIMEOUT default is 20).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from clustersim.errors import ClusterSimError
from clustersim.network.transport.engine import Event, ps
from clustersim.network.transport.flows import ACK, ACK_BYTES, DATA, NAK, TIMER_PRIORITY, MessageFlow
from clustersim.network.transport.links import Packet
from clustersim.network.transport.topology import Topology

IB_TIMEOUT_UNIT_S = 4.096e-6


@dataclass(frozen=True, slots=True)
class RcParams:
    """RC-like transport settings."""

    payload_bytes: int = 4096  # IB MTU
    header_bytes: int = 82  # RoCEv2 on Ethernet: framing 38 + IP 20 + UDP 8 + BTH 12 + ICRC 4
    timeout_exponent: int = 14  # local ACK timeout = 4.096 us x 2^14 = 67 ms
    window: int = 128  # packets outstanding (512 KiB)
    path: int | None = None  # the ECMP path; None = a hash of the flow

    def __post_init__(self) -> None:
        if not 0 <= self.timeout_exponent <= 31:
            raise ClusterSimError(
                f"timeout_exponent: {self.timeout_exponent} is not a 5-bit IB timeout (0..31)",
                field="timeout_exponent",
                value=self.timeout_exponent,
            )
        for name in ("payload_bytes", "window"):
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
        self.snd_una = 0
        self.snd_nxt = 0
        self.high_sent = 0
        self._deadline = 0
        self._timer_armed = False
        self.epsn = 0
        self._nak_sent = False

    def post(self, now_ps: int) -> list[Event]:
        self.snd_una = self.snd_nxt = self._base
        self._deadline = now_ps + self.rto_ps
        return self._pump(now_ps)

    def _pump(self, now_ps: int) -> list[Event]:
        events: list[Event] = []
        hop, route, flow, end = self.net.hop, self.route, self.flow, self._end
        seq, limit, full = (
            self.snd_nxt,
            min(end, self.snd_una + self.params.window),
            self.payload_bytes + self.header_bytes,
        )
        while seq < limit:
            if seq < self.high_sent:
                self.retransmissions += 1
            else:
                self.high_sent = seq + 1
            hop(now_ps, (flow, DATA, seq, full if seq < end - 1 else self.wire_bytes(seq), route, now_ps, 0))
            self.packets_sent += 1
            seq += 1
        self.snd_nxt = seq
        if not self._timer_armed and self.snd_una < self._end:
            self._timer_armed = True
            events.append((self._deadline, TIMER_PRIORITY, self._timer, None))
        return events

    def on_control(self, now_ps: int, packet: Packet) -> list[Event] | None:
        if self.done_ps is not None:
            return None  # a late acknowledgement after the last message
        kind, psn = packet[1], packet[2]
        if psn > self.snd_una:
            self.snd_una = psn
            self._deadline = now_ps + self.rto_ps
        if kind == NAK and psn >= self.snd_una:
            self.snd_nxt = psn  # go back N
        if self.snd_una >= self._end:
            return list(self._complete(now_ps) or ())
        return self._pump(now_ps)

    def _timer(self, now_ps: int, _: object) -> list[Event] | None:
        self._timer_armed = False
        if self.snd_una >= self._end or self._message >= len(self.sizes):
            return None
        if now_ps < self._deadline:
            self._timer_armed = True
            return [(self._deadline, TIMER_PRIORITY, self._timer, None)]
        self.timeouts += 1
        self.snd_nxt = self.snd_una
        self._deadline = now_ps + self.rto_ps
        return self._pump(now_ps)

    def on_data(self, now_ps: int, packet: Packet) -> list[Event] | None:
        seq, stamp = packet[2], packet[5]
        if seq == self.epsn:
            self.epsn += 1
            self._nak_sent = False
            kind = ACK
        elif seq > self.epsn:
            if self._nak_sent:
                return None
            self._nak_sent = True
            kind = NAK
        else:
            kind = ACK  # a duplicate: acknowledge again
        self.net.hop(now_ps, (self.flow, kind, self.epsn, ACK_BYTES, self.back_route, stamp, 0))
        return None  # a route has ports: the hop schedules its own event
