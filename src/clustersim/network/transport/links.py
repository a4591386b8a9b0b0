"""Links and switch ports: output-queued, first in first out, with a finite drop-tail buffer, optional
ECN marking, random loss and Poisson background traffic.

Background packets are not events: a port with background load replays its Poisson arrivals up to
the instant a packet of a flow reaches it (in arrival order, so the FIFO backlog is exact), and
starts the replay at most ``replay.BACKGROUND_WINDOW`` mean gaps back after a long idle spell (the queue
forgets older arrivals long before then at any load below 1).

A port is an index into flat lists (speed as picoseconds per byte, a fixed cost per packet, propagation
delay, buffer, loss probability), so forwarding a packet touches no object. A FIFO port's backlog is
``busy_until - now``: a packet that arrives is queued behind it, leaves after its own service time and
reaches the next node one propagation delay later. A port fed by one port only (``solo``, from the
routes a topology declares) sees its packets arrive in that port's departure order, so a packet crosses
it in the same event as its feeder: an event is where routes merge (and at the receiver), not at every
hop, with the same result to the picosecond. Likewise a receiver that alone sends into its host's port
(no other flow's sender or receiver there, declared by ``declare_injection``) takes its data in the event
where the data leaves the route's last port, and its answer goes on from there: a flow's data reach its
receiver in that port's FIFO order, so the receiver sees them, and its port its answers, in the order and
at the instants of delivery. Random loss and background draw from each port's own stream (a function of
the seed and the port), so results do not depend on the order ports are visited.

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
from itertools import pairwise

from clustersim.network.transport.engine import PRIORITY_BITS, Environment, Event, Stream
from clustersim.network.transport.replay import BackgroundReplay

ECN_BIT = 1 << 30
NO_LIMIT = 1 << 64  # beyond any time a run reaches (experiments stop at HORIZON_PS, 1 << 62)

Route = tuple[int, ...]
Packet = tuple[int, int, int, int, Route, int, int]
MAX_HOPS = 8
BACKGROUND_KEY = 1 << 40  # background streams' keys, apart from the ports' loss streams
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
        self.receivers: list[tuple[Receiver, Receiver, Receiver, Receiver]] = []  # by packet kind: data, ACK, NAK, CNP
        self.bg_next_ps: list[int] = []  # next background arrival (NO_LIMIT: none)
        self.bg_gap_ps: list[float] = []
        self.bg_service_ps: list[int] = []
        self.bg_packets = 0
        self.streams: list[Stream | None] = []  # each port's own loss draws
        self.background: dict[int, BackgroundReplay] = {}  # each background port's own arrivals
        # each port's (fixed_ps, ps_per_kib, buffer_ps, ecn_ps, prop_ps, loss), read in one go by the hops
        self.consts: list[tuple[int, int, int, int, int, float]] = []
        self.solo: list[bool] = []  # fed by one port only, over every registered route (see set_routes)
        self.inline: list[bool] = []  # by flow: its receiver runs in the event its data reaches the route's end
        self._host_fed: set[int] = set()  # ports that only hosts feed, over every registered route
        self._injectors: dict[int, set[int]] = {}  # port -> injectors (2 flow: its sender, 2 flow + 1: receiver)
        self._receiver_ports: list[tuple[int, ...]] = []  # by flow: the ports its receiver sends into
        self._receivers_at: dict[int, set[int]] = {}  # port -> flows whose answering receiver sends there
        self.hops: list[Callable[[int, Packet], Iterable[Event] | None]] = []
        for k in range(MAX_HOPS + 1):
            self.hops.append(self._make_hop(k))
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
        self.solo.append(False)
        self.consts.append(
            (self.fixed_ps[-1], self.ps_per_kib[-1], self.buffer_ps[-1], self.ecn_ps[-1], self.prop_ps[-1], spec.loss)
        )
        port = len(self.ps_per_byte) - 1
        self.streams.append(Stream(self.env.rng_for(port)) if spec.loss else None)
        return port

    def add_receiver(self, on_data: Receiver, on_control: Receiver | None = None) -> int:
        """Register the handlers that packets of a new flow reach at the end of their route: data
        packets (kind 0) go to ``on_data``, acknowledgements, NAKs and congestion notifications (kinds
        1-3) to ``on_control`` (``on_data`` too when not given); returns the flow id."""
        control = on_control or on_data
        self.receivers.append((on_data, control, control, control))
        self.inline.append(False)
        self._receiver_ports.append(())
        return len(self.receivers) - 1

    def declare_injection(
        self, flow: int, sender_ports: Iterable[int], receiver_ports: Iterable[int], *, answers_only: bool = True
    ) -> None:
        """Declare the ports that ``flow``'s sender and its receiver put packets into (their routes' first
        ports), before the run. A receiver that ``answers_only`` (its data handler reads only its own state,
        sets no timer and sends only on ``receiver_ports``, and its sender learns of it only by those
        packets) and is the only thing that puts packets into its ports, which no other port feeds, then
        runs in the event where its data leaves the route's last port (see ``_make_hop``): its ports see
        its packets in delivery order and at the delivery instants, as they would have otherwise."""
        senders, receivers = tuple(sender_ports), tuple(receiver_ports)
        for injector, ports in ((2 * flow, senders), (2 * flow + 1, receivers)):
            for port in ports:
                self._injectors.setdefault(port, set()).add(injector)
        self._receiver_ports[flow] = receivers if answers_only else ()
        for port in self._receiver_ports[flow]:
            self._receivers_at.setdefault(port, set()).add(flow)
        # only this flow and the receivers that send where it does can change
        self._update_inline({flow}.union(*(self._receivers_at.get(port, ()) for port in (*senders, *receivers))))

    def _update_inline(self, flows: Iterable[int]) -> None:
        for f in flows:
            own = self._receiver_ports[f]
            self.inline[f] = bool(own) and all(
                port in self._host_fed and self._injectors[port] == {2 * f + 1} for port in own
            )

    def set_routes(self, routes: Iterable[Route]) -> None:
        """Declare every route packets will take: a port that only one other port feeds (over all of
        them) is then crossed in the same event as its feeder (see ``_make_hop``). Without this call
        every hop is its own event."""
        feeders: dict[int, set[int]] = {}
        for route in routes:
            if len(route) > MAX_HOPS:
                raise ValueError(f"a route of {len(route)} ports is longer than {MAX_HOPS}")
            feeders.setdefault(route[0], set()).add(-1)  # a host injects here
            for prev, port in pairwise(route):
                feeders.setdefault(port, set()).add(prev)
        for port in range(len(self.solo)):
            self.solo[port] = len(feeders.get(port, ())) == 1 and -1 not in feeders[port]
        self._host_fed = {port for port, fed in feeders.items() if fed == {-1}}
        self._update_inline(range(len(self.inline)))

    def _make_hop(self, k: int) -> Callable[[int, Packet], Iterable[Event] | None]:
        """The event handler of a packet reaching the ``k``-th node of its route: hand it to its flow at
        the end of the route, else queue it on port ``route[k]`` (or drop it), and go on at once through
        each next port that is ``solo`` (fed by this one only: its arrivals come in this port's FIFO
        departure order, so its queue can be worked out now, exactly as at the arrival); one event is
        scheduled where the chain ends. The port lists are closure variables: this is the inner loop."""
        busy_until, consts, inline = self.busy_until, self.consts, self.inline
        drops, losses, receivers, streams = self.drops, self.losses, self.receivers, self.streams
        bg_next, background, solo, hops = self.bg_next_ps, self.background, self.solo, self.hops
        heap, counter, shift = self.env.heap, self.env.counter, PRIORITY_BITS

        def hop(now_ps: int, packet: Packet) -> Iterable[Event] | None:
            route = packet[4]
            end = len(route)
            if k == end:
                return receivers[packet[0]][packet[1]](now_ps, packet)
            j = k
            size = packet[3]
            while True:
                port = route[j]
                if bg_next[port] <= now_ps:  # background arrivals due: into the backlog first (_replay_background)
                    busy_until[port], bg_next[port], queued, dropped = background[port].replay(
                        now_ps, bg_next[port], busy_until[port]
                    )
                    self.bg_packets += queued
                    drops[port] += dropped
                fixed, per_kib, buffer, ecn, prop, p = consts[port]
                busy = busy_until[port]
                service = fixed + (size * per_kib >> 10)
                if busy > now_ps:
                    backlog = busy - now_ps
                    if backlog + service > buffer:
                        drops[port] += 1
                        return None
                    if backlog > ecn:
                        packet = (*packet[:6], packet[6] | ECN_BIT)
                    leave = busy + service
                else:
                    leave = now_ps + service
                busy_until[port] = leave
                if p and streams[port].uniform() < p:  # type: ignore[union-attr]
                    losses[port] += 1
                    return None
                now_ps = leave + prop
                j += 1
                if j == end or not solo[route[j]]:
                    break
            if j == end:
                flow = packet[0]
                if packet[1] or not inline[flow]:  # the flow's receiver (or sender) is the next event's handler
                    heappush(heap, (now_ps << shift, next(counter), receivers[flow][packet[1]], packet))
                    return None
                follow = receivers[flow][0](now_ps, packet)  # an inline receiver takes its data now
                if follow:
                    for at_ps, priority, handler, arg in follow:
                        heappush(heap, (at_ps << shift | priority, next(counter), handler, arg))
            elif j < MAX_HOPS:
                heappush(heap, (now_ps << shift, next(counter), hops[j], packet))
            else:
                raise ValueError(f"a route longer than {MAX_HOPS} ports")
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
        rng = self.env.rng_for(BACKGROUND_KEY | port)
        self.background[port] = BackgroundReplay(
            rng, self.bg_gap_ps[port], self.bg_service_ps[port], self.buffer_ps[port]
        )
        self.bg_next_ps[port] = self.background[port].first(self.env.now_ps)

    def _replay_background(self, port: int, now_ps: int) -> None:
        """Apply the background arrivals on ``port`` up to ``now_ps`` to its backlog, in order."""
        busy, self.bg_next_ps[port], queued, dropped = self.background[port].replay(
            now_ps, self.bg_next_ps[port], self.busy_until[port]
        )
        self.busy_until[port] = busy
        self.bg_packets += queued
        self.drops[port] += dropped
