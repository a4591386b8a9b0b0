"""Lossless links as RDMA fabrics deploy them: explicit per-port queues that a link-level flow control
can stop, PFC pause/resume for RoCE and credits for InfiniBand, and RED/ECN marking for DCQCN.

``Network``'s ports fix a packet's departure on arrival (an implicit FIFO), which a pause cannot
stop; here each port holds its queue (one per traffic class) and a transmitter that takes the head
packet when it is free, not paused and, on a credit link, holds credit for it. A packet that a
switch port queues came in over the link of the previous port on its route (its ingress link):
its bytes count against that link's ingress account, per traffic class, until the packet leaves the
switch.

* PFC (IEEE 802.1Qbb): when a link's account reaches ``xoff_bytes`` the switch sends a pause frame
  back over it; the upstream port stops sending that class one propagation delay later (what is
  already on the wire keeps arriving: the headroom absorbs it). When the account falls to
  ``xon_bytes`` a resume frame follows, again one propagation delay away. A paused port holds every
  packet of the class behind its head, whatever their destination: head-of-line blocking. A packet
  that finds the account above ``xoff_bytes + headroom_bytes`` is dropped (headroom too small for
  the link's delay): with the default headroom this does not happen.
* Credits (InfiniBand link-level flow control, IBA vol. 1 sec. 7.9): a port sends a packet into the
  next switch only while it holds credit for it (``credit_bytes`` per link and class: the
  receiving buffer); the credit comes back one propagation delay after the packet leaves that
  switch (or, for a packet corrupted on the wire, is discarded there). A host's NIC always accepts,
  so the last hop needs none.

Two classes: control (ACKs, NAKs, CNPs) is strict priority and not flow-controlled, as CNPs ride
their own high priority on ConnectX NICs (cnp_802p_prio 6); RDMA data is the lossless class. (A
simplification: RoCE deployments often put ACKs in the data's class.) Random loss (``PortSpec.loss``,
corruption on the wire) still applies: lossless means no congestion drop, not a perfect cable.

ECN: a data packet is marked with RED's probability on the egress backlog it joins: 0 below
``kmin_bytes``, rising to ``pmax`` at ``kmax_bytes``, 1 above (DCQCN's switch side; Zhu et al.,
"Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015: Kmin 5 KB, Kmax 200 KB, Pmax 1%).

Background traffic is explicit here: Poisson packets into the port's data queue, paused with it
(``Background``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from heapq import heappush
from typing import Any

from clustersim.errors import ClusterSimError
from clustersim.network.transport.engine import PRIORITY_BITS, Environment, Event, Stream
from clustersim.network.transport.links import BACKGROUND_KEY, Network, Packet, PortSpec
from clustersim.network.transport.lossless_path import DATA_CLASS, hot_path
from clustersim.network.transport.replay import BACKGROUND_WINDOW

FLOW_CONTROLS = ("none", "pfc", "credit")
ECN_KEY = 1 << 41  # the ports' marking streams, apart from loss (port) and background (BACKGROUND_KEY | port)
MTU_FRAME_BYTES = 4096 + 82


@dataclass(frozen=True, slots=True)
class LosslessSpec:
    """Flow control and marking of a lossless fabric. ``headroom_bytes`` and ``credit_bytes`` of
    ``None`` are sized from each link's speed and delay (``headroom``)."""

    mode: str = "pfc"  # "pfc" (RoCE) or "credit" (InfiniBand)
    xoff_bytes: int = 100_000  # per ingress link and class: a pause goes upstream at this account
    xon_bytes: int | None = None  # resume below this (None: xoff less two MTU frames)
    headroom_bytes: int | None = None  # above xoff before a drop (None: headroom(link))
    credit_bytes: int | None = None  # credit per link and class (None: xoff plus headroom(link))
    ecn: bool = False  # RED marking of data packets (DCQCN's switch side)
    kmin_bytes: int = 5_000  # DCQCN paper (Zhu et al. 2015, sec. 6)
    kmax_bytes: int = 200_000
    pmax: float = 0.01

    def __post_init__(self) -> None:
        if self.mode not in ("pfc", "credit"):
            raise ClusterSimError(
                f"flow control: {self.mode!r} is not lossless (valid: pfc, credit)",
                field="flow_control",
                value=self.mode,
            )
        if self.xoff_bytes < 2 * MTU_FRAME_BYTES:
            raise ClusterSimError(
                f"xoff_bytes: {self.xoff_bytes} is below two frames ({2 * MTU_FRAME_BYTES} B)",
                field="xoff_bytes",
                value=self.xoff_bytes,
            )
        if self.xon_bytes is not None and not 0 <= self.xon_bytes < self.xoff_bytes:
            raise ClusterSimError(
                f"xon_bytes: {self.xon_bytes} must be in [0, xoff_bytes {self.xoff_bytes})",
                field="xon_bytes",
                value=self.xon_bytes,
            )
        if self.credit_bytes is not None and self.credit_bytes < MTU_FRAME_BYTES:
            raise ClusterSimError(
                f"credit_bytes: {self.credit_bytes} is below one frame ({MTU_FRAME_BYTES} B): no full packet could "
                "ever cross the link",
                field="credit_bytes",
                value=self.credit_bytes,
            )
        if self.headroom_bytes is not None and self.headroom_bytes < 0:
            raise ClusterSimError(
                f"headroom_bytes: {self.headroom_bytes} must be 0 or more",
                field="headroom_bytes",
                value=self.headroom_bytes,
            )
        if not (0 <= self.kmin_bytes < self.kmax_bytes and 0 < self.pmax <= 1):
            raise ClusterSimError(
                f"ecn: kmin {self.kmin_bytes} < kmax {self.kmax_bytes} and pmax {self.pmax} in (0, 1] are needed",
                field="ecn",
                value=(self.kmin_bytes, self.kmax_bytes, self.pmax),
            )

    @property
    def xon(self) -> int:
        """The resume threshold."""
        return self.xoff_bytes - 2 * MTU_FRAME_BYTES if self.xon_bytes is None else self.xon_bytes


def headroom(spec: PortSpec, frame_bytes: int = MTU_FRAME_BYTES) -> int:
    """What a link delivers after its account crosses xoff: the bytes in flight over one round trip
    of the link (the pause frame's way up, the last packets' way down) plus a frame being sent at
    each end when the pause is decided and when it lands (the 802.1Qbb delay budget, simplified)."""
    return int(2 * spec.propagation_s * spec.bits_per_s / 8) + 2 * frame_bytes + 2 * 84


def _unbuilt(k: int) -> Callable[[int, Packet], Iterable[Event] | None]:
    """What ``Network``'s constructor gets for hop ``k`` before ``lossless_path.hot_path`` replaces it."""

    def hop(now_ps: int, packet: Packet) -> None:
        raise RuntimeError(f"hop {k} of a lossless network ran before its handlers were built")

    return hop


class LosslessNetwork(Network):
    """``Network`` with explicit queues under PFC or credit flow control (see the module's text)."""

    def __init__(self, env: Environment, spec: LosslessSpec) -> None:
        self.spec = spec
        self.pfc = spec.mode == "pfc"
        self.queues: list[tuple[deque[tuple[Packet, int]], deque[tuple[Packet, int]]]] = []
        self.backlog_bytes: list[int] = []  # bytes queued at each port (its egress backlog)
        self.sending: list[bool] = []
        self.paused: list[bool] = []  # the data class on this port is paused by its downstream switch
        self.pause_sent: list[bool] = []  # by link (its upstream port): a pause is in force or on its way
        self.ingress_bytes: list[int] = []  # by link: data bytes it brought that are still in the switch
        self.limit_bytes: list[int] = []  # by link: the account above which a packet is dropped
        self.credits: list[int] = []  # by link: credit the upstream port holds for the switch's buffer
        self.pause_frames = 0
        self.paused_ps: list[int] = []  # by port: time its data class spent paused
        self._paused_since: list[int] = []
        self.ecn_marks = 0
        self.bg_drops = 0
        self._ecn_stream: list[Stream] = []
        self.in_flight = 0  # flow packets in the network: background runs while there are any
        self._bg_at: dict[int, Background] = {}
        self._heap, self._counter = env.heap, env.counter
        self._service: list[tuple[int, int]] = []  # by port: (fixed_ps, ps_per_kib)
        self._hop_for: Callable[[int], Callable[[int, Packet], Iterable[Event] | None]] = _unbuilt
        self._send: Callable[[int, int], None] = lambda now_ps, port: None
        super().__init__(env)
        self._send, self._hop_for = hot_path(self)  # the inner loop (lossless_path)
        self.hops[:] = [self._hop_for(k) for k in range(len(self.hops))]
        self.hop = self.hops[0]

    def add_port(self, spec: PortSpec) -> int:
        port = super().add_port(spec)
        room = self.spec.headroom_bytes if self.spec.headroom_bytes is not None else headroom(spec)
        credit = self.spec.credit_bytes if self.spec.credit_bytes is not None else self.spec.xoff_bytes + room
        self.queues.append((deque(), deque()))
        self.backlog_bytes.append(0)
        self.sending.append(False)
        self.paused.append(False)
        self.pause_sent.append(False)
        self.ingress_bytes.append(0)
        self.limit_bytes.append(self.spec.xoff_bytes + room if self.pfc else credit)
        self.credits.append(credit)
        self.paused_ps.append(0)
        self._paused_since.append(0)
        self._ecn_stream.append(Stream(self.env.rng_for(ECN_KEY | port)))
        self._service.append((self.fixed_ps[port], self.ps_per_kib[port]))
        return port

    def set_routes(self, routes: Iterable[tuple[int, ...]]) -> None:
        super().set_routes(routes)
        self.solo = [False] * len(self.solo)  # every hop is its own event here

    def _update_inline(self, flows: Iterable[int]) -> None:
        for f in flows:
            self.inline[f] = False

    def _make_hop(self, k: int) -> Callable[[int, Packet], Iterable[Event] | None]:
        """The handler of a packet reaching the ``k``-th node of its route (``lossless_path.hot_path``'s)."""
        return self._hop_for(k)

    def _push(self, at_ps: int, handler: Callable[[int, Any], object], arg: object) -> None:
        entry: tuple[int, int, Any, Any] = (at_ps << PRIORITY_BITS, next(self._counter), handler, arg)
        heappush(self._heap, entry)

    def _marks(self, port: int) -> bool:
        spec, backlog = self.spec, self.backlog_bytes[port]
        if backlog <= spec.kmin_bytes:
            return False
        if backlog >= spec.kmax_bytes:
            return True
        p = spec.pmax * (backlog - spec.kmin_bytes) / (spec.kmax_bytes - spec.kmin_bytes)
        return self._ecn_stream[port].uniform() < p

    def _set_pause(self, now_ps: int, arg: tuple[int, bool]) -> None:
        port, on = arg
        if on and not self.paused[port]:
            self._paused_since[port] = now_ps
        elif not on and self.paused[port]:
            self.paused_ps[port] += now_ps - self._paused_since[port]
        self.paused[port] = on
        if not on and not self.sending[port]:
            self._send(now_ps, port)

    def _credit(self, now_ps: int, arg: tuple[int, int]) -> None:
        port, size = arg
        self.credits[port] += size
        if not self.sending[port]:
            self._send(now_ps, port)

    def start_background(self, port: int, load: float, packet_bytes: int = 9000) -> None:
        """Poisson packets of ``packet_bytes`` into ``port``'s data queue at ``load`` of its speed while
        flows have packets in the network (``Background``); paused with the port, dropped (``bg_drops``)
        past its buffer."""
        if not 0 <= load < 1:
            raise ValueError(f"background load must be in [0, 1), got {load}")
        if load > 0:
            self._bg_at[port] = Background(self, port, load, packet_bytes)


class Background:
    """Poisson background on one port of a ``LosslessNetwork``. Arrivals are events only from the first
    flow packet that reaches the port (a port no flow crosses cannot delay one: background is not
    accounted to an ingress link, so it pauses nothing upstream) and while some flow has a packet in
    the network; when none has (a flow waiting out a timeout) they stop, and when a flow packet next
    reaches the port they resume with its queue warmed: the backlog that
    ``BACKGROUND_WINDOW`` mean gaps of arrivals into an empty port leave (the stationary queue to
    within a packet), less the background still queued there, is queued at once."""

    def __init__(self, net: LosslessNetwork, port: int, load: float, packet_bytes: int) -> None:
        self.net, self.port, self.size = net, port, packet_bytes
        self.mean_gap_ps = packet_bytes * net.ps_per_byte[port] / load
        self.service_ps = net.fixed_ps[port] + (packet_bytes * net.ps_per_kib[port] >> 10)
        self.stream = Stream(net.env.rng_for(BACKGROUND_KEY | port))
        self.packet: Packet = (-1, 0, 0, packet_bytes, (port,), 0, 0)
        self.buffer_bytes = net.buffer_ps[port] / net.ps_per_byte[port]
        self.queued = 0  # its packets in the port's queue
        self.running = False

    def wake(self, now_ps: int) -> None:
        """Flow packets are back in the network: warm the queue and schedule the next arrival."""
        if self.running:
            return
        self.running = True
        busy, arrival = 0, 0
        for _ in range(BACKGROUND_WINDOW):
            arrival += self.stream.exponential_ps(self.mean_gap_ps)
            busy = max(busy, arrival) + self.service_ps
        backlog = max(0, busy - arrival - self.service_ps)  # left after the last arrival's own service
        for _ in range(-(-backlog // self.service_ps) - self.queued):
            self._enqueue(now_ps)
        self.net._push(now_ps + self.stream.exponential_ps(self.mean_gap_ps), self.arrive, None)

    def _enqueue(self, now_ps: int) -> None:
        net, port = self.net, self.port
        if net.backlog_bytes[port] + self.size > self.buffer_bytes:
            net.bg_drops += 1
            return
        net.backlog_bytes[port] += self.size
        self.queued += 1
        net.queues[port][DATA_CLASS].append((self.packet, 0))
        if not net.sending[port]:
            net._send(now_ps, port)

    def arrive(self, now_ps: int, _: object) -> None:
        """One arrival, and the next while flows have packets in the network."""
        if self.net.in_flight <= 0:
            self.running = False
            return
        self._enqueue(now_ps)
        self.net._push(now_ps + self.stream.exponential_ps(self.mean_gap_ps), self.arrive, None)
