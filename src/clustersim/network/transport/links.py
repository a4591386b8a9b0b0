"""Links and switch ports: output-queued, first in first out, with a finite drop-tail buffer, optional
ECN marking, random loss and Poisson background traffic.

A port is an index into flat lists (speed as picoseconds per byte, a fixed cost per packet, propagation
delay, buffer, loss probability), so forwarding a packet touches no object. A FIFO port's backlog is
``busy_until - now``: a packet that arrives is queued behind it, leaves after its own service time and
reaches the next node one propagation delay later, so each hop of each packet is one event.

A packet is the tuple ``(flow, kind, seq, wire_bytes, route, hop, stamp_ps, tag)``: ``route`` is the
tuple of ports it crosses (shared by every packet on that path), ``hop`` the next one, ``tag`` whatever
its transport carries (a path index, an ECN mark in bit 30).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from clustersim.network.transport.engine import Environment, Event

ECN_BIT = 1 << 30
NO_LIMIT = 1 << 62

Packet = tuple[int, int, int, int, tuple[int, ...], int, int, int]
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
        self.fixed_ps: list[int] = []
        self.prop_ps: list[int] = []
        self.buffer_ps: list[int] = []
        self.ecn_ps: list[int] = []
        self.loss: list[float] = []
        self.busy_until: list[int] = []
        self.drops: list[int] = []
        self.losses: list[int] = []
        self.sent_bytes: list[int] = []
        self.receivers: list[Receiver] = []
        self.active_flows = 0

    def add_port(self, spec: PortSpec) -> int:
        """A new port; returns its index."""
        if not spec.bits_per_s > 0:
            raise ValueError(f"port speed must be > 0 bits/s, got {spec.bits_per_s}")
        ps_per_byte = 8e12 / spec.bits_per_s
        self.ps_per_byte.append(ps_per_byte)
        self.fixed_ps.append(round(spec.per_packet_s * 1e12))
        self.prop_ps.append(round(spec.propagation_s * 1e12))
        self.buffer_ps.append(NO_LIMIT if spec.buffer_bytes == float("inf") else int(spec.buffer_bytes * ps_per_byte))
        self.ecn_ps.append(NO_LIMIT if spec.ecn_bytes == float("inf") else int(spec.ecn_bytes * ps_per_byte))
        self.loss.append(spec.loss)
        self.busy_until.append(0)
        self.drops.append(0)
        self.losses.append(0)
        self.sent_bytes.append(0)
        return len(self.ps_per_byte) - 1

    def add_receiver(self, receiver: Receiver) -> int:
        """Register the handler that packets of a new flow reach at the end of their route; returns the
        flow id."""
        self.receivers.append(receiver)
        return len(self.receivers) - 1

    def hop(self, now_ps: int, packet: Packet) -> list[Event] | Iterable[Event] | None:
        """The event handler of a packet reaching the next node of its route: hand it to its flow at
        the end of the route, else queue it on the next port (or drop it)."""
        flow, kind, seq, size, route, hop, stamp, tag = packet
        if hop == len(route):
            return self.receivers[flow](now_ps, packet)
        port = route[hop]
        busy = self.busy_until[port]
        backlog = busy - now_ps if busy > now_ps else 0
        service = self.fixed_ps[port] + int(size * self.ps_per_byte[port])
        if backlog + service > self.buffer_ps[port]:
            self.drops[port] += 1
            return None
        if backlog > self.ecn_ps[port]:
            tag |= ECN_BIT
        leave = now_ps + backlog + service
        self.busy_until[port] = leave
        self.sent_bytes[port] += size
        p = self.loss[port]
        if p and self.env.uniform() < p:
            self.losses[port] += 1
            return None
        return ((leave + self.prop_ps[port], 0, self.hop, (flow, kind, seq, size, route, hop + 1, stamp, tag)),)

    def send(self, now_ps: int, packet: Packet) -> Event:
        """The event that puts ``packet`` on the first port of its route now."""
        return (now_ps, 0, self.hop, packet)

    def start_background(self, port: int, load: float, packet_bytes: int = 9000) -> None:
        """Poisson background packets on ``port`` at ``load`` (a fraction of its speed) while any flow
        is active: they take capacity and buffer, then leave the simulation."""
        if not 0 <= load < 1:
            raise ValueError(f"background load must be in [0, 1), got {load}")
        if load == 0:
            return
        mean_gap_ps = packet_bytes * self.ps_per_byte[port] / load
        self.env.schedule(self.env.now_ps, self._background, (port, packet_bytes, mean_gap_ps), priority=1)

    def _background(self, now_ps: int, arg: tuple[int, int, float]) -> list[Event] | None:
        port, size, mean_gap_ps = arg
        if self.active_flows <= 0:
            return None
        busy = self.busy_until[port]
        backlog = busy - now_ps if busy > now_ps else 0
        service = self.fixed_ps[port] + int(size * self.ps_per_byte[port])
        if backlog + service > self.buffer_ps[port]:
            self.drops[port] += 1
        else:
            self.busy_until[port] = now_ps + backlog + service
        return [(now_ps + self.env.exponential_ps(mean_gap_ps), 1, self._background, arg)]
