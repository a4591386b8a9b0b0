"""Links and switch ports: output-queued, first in first out, with a finite drop-tail buffer, optional
ECN marking, random loss and Poisson background traffic.

Background packets are not events: a port with background load replays its Poisson arrivals up to
``now`` when a packet of a flow reaches it (in arrival order, so the FIFO backlog is exact), and
starts the replay at most ``BACKGROUND_WINDOW`` mean gaps back after a long idle spell (the queue
forgets older arrivals long before then at any load below 1).

A port is an index into flat lists (speed as picoseconds per byte, a fixed cost per packet, propagation
delay, buffer, loss probability), so forwarding a packet touches no object. A FIFO port's backlog is
``busy_until - now``: a packet that arrives is queued behind it, leaves after its own service time and
reaches the next node one propagation delay later, so each hop of each packet is one event.

A packet is the tuple ``(flow, kind, seq, wire_bytes, route, stamp_ps, tag)``: ``route`` is the tuple
of ports it crosses (shared by every packet on that path), ``tag`` whatever its transport carries (a
path index, an ECN mark in bit 30). Which hop a packet is at is not in the tuple: the event's handler
is the one for that hop (``Network.hops[k]``), so a packet tuple is made once and never copied on its
way unless a switch marks it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from heapq import heappush

from clustersim.network.transport.engine import PRIORITY_BITS, Environment, Event

ECN_BIT = 1 << 30
NO_LIMIT = 1 << 62

Packet = tuple[int, int, int, int, tuple[int, ...], int, int]
MAX_HOPS = 8
BACKGROUND_WINDOW = 2000  # mean gaps replayed at most after an idle spell
Receiver = Callable[[int, Packet], "Iterable[Event] | None"]


@dataclass(frozen=True, slots=True)
class PortSpec:
    """One direction of a link: speed, fixed cost per packet, delay, buffer, loss, ECN threshold."""

    bits_per_s: float
    propagation_s: float = 0.0
    per_packet_s: float = 0.0  # a fixed service cost per packet (a host stack), on top of bytes / speed
    buffer_bytes: float = float("inf")
    loss: float = 0.0  # probability that a packet is lost on this port (corruption on the wire)
    ecn_bytes: float = float("inf")  # backlog above which a packet is ECN-marked


class Network:
    """Ports, their state and counters, and the flows' receivers."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.ps_per_byte: list[float] = []
        self.ps_per_kib: list[int] = []  # picoseconds per 1,024 bytes, rounded: integer service times
        self.fixed_ps: list[int] = []
        self.prop_ps: list[int] = []
        self.buffer_ps: list[int] = []
        self.ecn_ps: list[int] = []
        self.loss: list[float] = []
        self.busy_until: list[int] = []
        self.drops: list[int] = []
        self.losses: list[int] = []
        self.receivers: list[tuple[Receiver, Receiver, Receiver]] = []  # by packet kind: data, ACK, NAK
        self.bg_next_ps: list[int] = []  # next background arrival (NO_LIMIT: none)
        self.bg_gap_ps: list[float] = []
        self.bg_service_ps: list[int] = []
        self.bg_packets = 0
        self.hops: list[Callable[[int, Packet], Iterable[Event] | None]] = []
        for k in range(MAX_HOPS, -1, -1):
            self.hops.insert(0, self._make_hop(k, self.hops[0] if self.hops else None))
        self.hop = self.hops[0]

    def add_port(self, spec: PortSpec) -> int:
        """A new port; returns its index."""
        if not spec.bits_per_s > 0:
            raise ValueError(f"port speed must be > 0 bits/s, got {spec.bits_per_s}")
        ps_per_byte = 8e12 / spec.bits_per_s
        self.ps_per_byte.append(ps_per_byte)
        self.ps_per_kib.append(round(ps_per_byte * 1024))
        self.fixed_ps.append(round(spec.per_packet_s * 1e12))
        self.prop_ps.append(round(spec.propagation_s * 1e12))
        self.buffer_ps.append(NO_LIMIT if spec.buffer_bytes == float("inf") else int(spec.buffer_bytes * ps_per_byte))
        self.ecn_ps.append(NO_LIMIT if spec.ecn_bytes == float("inf") else int(spec.ecn_bytes * ps_per_byte))
        self.loss.append(spec.loss)
        self.busy_until.append(0)
        self.drops.append(0)
        self.losses.append(0)
        self.bg_next_ps.append(NO_LIMIT)
        self.bg_gap_ps.append(0.0)
        self.bg_service_ps.append(0)
        return len(self.ps_per_byte) - 1

    def add_receiver(self, on_data: Receiver, on_control: Receiver | None = None) -> int:
        """Register the handlers that packets of a new flow reach at the end of their route: data
        packets (kind 0) go to ``on_data``, acknowledgements and NAKs (kinds 1, 2) to ``on_control``
        (``on_data`` too when not given); returns the flow id."""
        control = on_control or on_data
        self.receivers.append((on_data, control, control))
        return len(self.receivers) - 1

    def _make_hop(
        self, k: int, next_hop: Callable[[int, Packet], Iterable[Event] | None] | None
    ) -> Callable[[int, Packet], Iterable[Event] | None]:
        """The event handler of a packet reaching the ``k``-th node of its route: hand it to its flow at
        the end of the route, else queue it on port ``route[k]`` (or drop it). The port lists are bound
        as closure variables: this is the simulator's inner loop."""
        busy_until, fixed_ps, ps_per_kib = self.busy_until, self.fixed_ps, self.ps_per_kib
        buffer_ps, ecn_ps, prop_ps, loss = self.buffer_ps, self.ecn_ps, self.prop_ps, self.loss
        drops, losses, receivers, uniform = self.drops, self.losses, self.receivers, self.env.uniform
        bg_next, replay = self.bg_next_ps, self._replay_background
        heap, counter, shift = self.env.heap, self.env.counter, PRIORITY_BITS

        def hop(now_ps: int, packet: Packet) -> Iterable[Event] | None:
            route = packet[4]
            if k == len(route):
                return receivers[packet[0]][packet[1]](now_ps, packet)
            port = route[k]
            if bg_next[port] <= now_ps:
                replay(port, now_ps)
            busy = busy_until[port]
            service = fixed_ps[port] + (packet[3] * ps_per_kib[port] >> 10)
            if busy > now_ps:
                backlog = busy - now_ps
                if backlog + service > buffer_ps[port]:
                    drops[port] += 1
                    return None
                if backlog > ecn_ps[port]:
                    packet = (*packet[:6], packet[6] | ECN_BIT)
                leave = busy + service
            else:
                leave = now_ps + service
            busy_until[port] = leave
            p = loss[port]
            if p and uniform() < p:
                losses[port] += 1
                return None
            if next_hop is None:
                raise ValueError(f"a route longer than {MAX_HOPS} ports")
            heappush(heap, ((leave + prop_ps[port]) << shift, next(counter), next_hop, packet))
            return None

        return hop

    def start_background(self, port: int, load: float, packet_bytes: int = 9000) -> None:
        """Poisson background packets on ``port`` at ``load`` (a share of its speed): they take capacity
        and buffer, then leave the simulation."""
        if not 0 <= load < 1:
            raise ValueError(f"background load must be in [0, 1), got {load}")
        if load == 0:
            return
        self.bg_gap_ps[port] = packet_bytes * self.ps_per_byte[port] / load
        self.bg_service_ps[port] = self.fixed_ps[port] + (packet_bytes * self.ps_per_kib[port] >> 10)
        self.bg_next_ps[port] = self.env.now_ps + self.env.exponential_ps(self.bg_gap_ps[port])

    def _replay_background(self, port: int, now_ps: int) -> None:
        """Apply the background arrivals on ``port`` up to ``now_ps`` to its backlog, in order."""
        gap, service, limit = self.bg_gap_ps[port], self.bg_service_ps[port], self.buffer_ps[port]
        arrival = max(self.bg_next_ps[port], now_ps - int(BACKGROUND_WINDOW * gap))
        busy = self.busy_until[port]
        exponential = self.env.exponential_ps
        while arrival <= now_ps:
            backlog = busy - arrival if busy > arrival else 0
            if backlog + service > limit:
                self.drops[port] += 1
            else:
                busy = arrival + backlog + service
                self.bg_packets += 1
            arrival += exponential(gap)
        self.busy_until[port] = busy
        self.bg_next_ps[port] = arrival
