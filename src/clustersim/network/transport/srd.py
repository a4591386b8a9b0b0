"""An SRD-like transport (AWS's Scalable Reliable Datagram, as EFA uses it).

Messages are cut into MTU packets (about 8 KiB on EFA) sprayed over every equal-cost path: each
packet takes the path with the least expected delay (packets in flight on it, weighted by its smoothed
round-trip time), so congested or lossy paths are avoided. Packets may arrive out of order; the
receiver acknowledges each one on the path it came by (reordering is left to the layer above, as
libfabric's EFA provider does). A packet unacknowledged one RTO after it left the host is sent again.
The RTO is the flow's smoothed round trip plus four deviations (RFC 6298's rule), never below a floor:
the larger of ``rto_s`` (the real timer is not public: tens of microseconds, a parameter) and, with
``queue_aware_rto``, ``queue_floor_ps``, the time a full buffer takes to drain at the worst port of the
flow's routes plus the round trip without queues. The deadlines wait in a queue in send order (the
host link is FIFO, so they only grow) under one timer event per flow, armed at the earliest deadline
of a packet still unacknowledged. The first window is at most one bandwidth-delay product of the path
(``initial_bdp_packets``, with ``bdp_initial_window``). Congestion control is
delay-based, as Swift is: the window grows by one packet per round trip while the measured queueing
delay stays under a target and shrinks in proportion to the excess (at most once per round trip) above
it. The target grows as the window shrinks (Swift's flow-based scaling): with a fixed target a flow
facing a queue it cannot drain cuts to one packet and starves, far below the capacity left: Poisson
background at 90% of every spine port puts about 13 us of queueing into each round trip (four loaded
ports, data and ACK, each an M/D/1 wait of 0.9 x 0.72 us / (2 x 0.1) for 9 kB packets at 100 Gbit/s),
three times a 4 us target, whatever the flow's own rate.

The RTO floor and the first window are this model's assumptions, not published SRD constants. The
floor: ``RTO_min >= max(buffer_bytes / speed over the routes' finite-buffer ports) + base RTT``. On a
drop-tail port a packet that is kept waits at most its buffer over the port's speed, so a timer below
that plus the round trip cannot tell a queued packet from a lost one, and RFC 6298's estimate lags a
queue that builds within one round trip (an incast's first windows): with a 50 us floor, 8 senders
into one 4 MB port at 100 Gbit/s (up to 320 us of queue) resent 216 packets that were never dropped.
It assumes one port is the bottleneck (a packet queued at several full ports can still time out) and
costs real losses that much more wait (about 90 us at 1 MB, 330 us at 4 MB; TCP waits 200 ms).
The first window is limited, not paced: the host link already serialises a burst at line rate, so
pacing at line rate would change nothing and a lower pace needs a rate the sender cannot know before
its first RTT sample; one bandwidth-delay product is what a lone flow needs to fill its path, and N
synchronised senders then put N of them into a shared buffer in their first round trip instead of N
x 64 packets, after which the delay-based control sizes the window from measured RTTs.

Sources: Shalev et al., "A Cloud-Optimized Transport Protocol for Elastic and Scalable HPC", IEEE Micro
40(6) 2020 (spraying, path avoidance, out-of-order delivery, RTT-driven rate control); fi_efa(7)
(MTU ~8 KiB, reordering in the provider); amzn-drivers efa SRD.txt (sender-side retransmission); Kumar
et al., "Swift: Delay is Simple and Effective for Congestion Control in the Datacenter", SIGCOMM 2020
(delay target, additive increase per ACK, multiplicative decrease by the excess, flow-based scaling).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from clustersim.errors import ClusterSimError
from clustersim.network.transport.engine import Event, ps
from clustersim.network.transport.flows import ACK, ACK_BYTES, DATA, TIMER_PRIORITY, MessageFlow
from clustersim.network.transport.links import NO_LIMIT, Packet
from clustersim.network.transport.topology import Route, Topology

ATTEMPT_SHIFT = 8  # tag = path + (attempt << 8): up to 256 paths
PATH_PROBES = 4  # paths weighed for each packet
CUM_SHIFT = 32  # an ACK's tag also carries the receiver's contiguous prefix (packets below it all arrived)


@dataclass(frozen=True, slots=True)
class SrdParams:
    """SRD-like transport settings."""

    payload_bytes: int = 8192  # EFA MTU ~8 KiB (fi_efa(7))
    header_bytes: int = 84  # Ethernet framing, IP, UDP and SRD headers (an assumption: the SRD header is not public)
    rto_s: float = 50e-6  # "tens of microseconds" (AWS; the constant is not public)
    target_delay_s: float = 4e-6  # queueing delay the congestion control aims under, at a full window
    flow_scaling_s: float = 20e-6  # extra target at a window of one packet (Swift's fs_range; 0: none)
    flow_scaling_window: float = 100.0  # window at and above which the extra target is zero (fs_max_cwnd)
    initial_window: int = 64  # packets, at most one bandwidth-delay product of the path (bdp_initial_window)
    max_window: int = 256  # packets
    num_paths: int | None = None  # paths to spray over; None = every equal-cost route
    queue_aware_rto: bool = True  # the RTO floor covers a full buffer's drain at the worst port (queue_floor_ps)
    bdp_initial_window: bool = True  # the first window is at most one bandwidth-delay product (initial_bdp_packets)

    def __post_init__(self) -> None:
        for name in ("payload_bytes", "initial_window", "max_window"):
            if getattr(self, name) < 1:
                raise ClusterSimError(
                    f"{name}: {getattr(self, name)} must be at least 1", field=name, value=getattr(self, name)
                )
        if not self.rto_s > 0:
            raise ClusterSimError(f"rto_s: {self.rto_s!r} must be > 0 s", field="rto_s", value=self.rto_s)
        if not (self.flow_scaling_s >= 0 and math.isfinite(self.flow_scaling_s)):
            raise ClusterSimError(
                f"flow_scaling_s: {self.flow_scaling_s!r} must be a finite number >= 0 s",
                field="flow_scaling_s",
                value=self.flow_scaling_s,
            )
        if not self.flow_scaling_window > 1:
            raise ClusterSimError(
                f"flow_scaling_window: {self.flow_scaling_window!r} must be > 1 packet",
                field="flow_scaling_window",
                value=self.flow_scaling_window,
            )

    def target_ps(self, cwnd: float) -> int:
        """The queueing delay aimed under at window ``cwnd`` (packets): ``target_delay_s`` plus Swift's
        flow-based scaling, ``alpha / sqrt(cwnd) + beta`` clamped to [0, ``flow_scaling_s``], which is
        ``flow_scaling_s`` at one packet and 0 from ``flow_scaling_window`` on (Kumar et al., SIGCOMM 2020).
        A flow squeezed to a small window then tolerates the queue it cannot drain, one that
        inelastic traffic or many flows build, rather than cut to its floor and starve on it."""
        inv_max = 1 / math.sqrt(self.flow_scaling_window)
        alpha = self.flow_scaling_s / (1 - inv_max)
        extra = alpha / math.sqrt(max(cwnd, 1.0)) - alpha * inv_max
        return ps(self.target_delay_s + min(max(extra, 0.0), self.flow_scaling_s))


def base_rtt_ps(topo: Topology, route: Route, back_route: Route, wire_bytes: int) -> int:
    """The round trip of a ``wire_bytes`` packet out over ``route`` and its acknowledgement back over
    ``back_route`` with every queue empty: propagation, the fixed cost and serialisation at each port."""
    net = topo.net
    out = sum(net.prop_ps[p] + net.fixed_ps[p] + round(wire_bytes * net.ps_per_byte[p]) for p in route)
    back = sum(net.prop_ps[p] + net.fixed_ps[p] + round(ACK_BYTES * net.ps_per_byte[p]) for p in back_route)
    return out + back


def queue_floor_ps(topo: Topology, routes: Sequence[Route], back_routes: Sequence[Route], wire_bytes: int) -> int:
    """The queue-aware RTO floor: the longest a full buffer takes to drain at any finite-buffer port of
    the routes and back routes (``buffer_bytes / speed``, the longest a packet that is not dropped can
    wait there) plus the longest round trip without queues over them. A host's own send queue is
    unbounded but the timer starts when a packet leaves it, so it does not count."""
    net = topo.net
    ports = {p for route in (*routes, *back_routes) for p in route}
    drain = max((net.buffer_ps[p] for p in ports if net.buffer_ps[p] < NO_LIMIT), default=0)
    rtt = max(base_rtt_ps(topo, r, back_routes[i % len(back_routes)], wire_bytes) for i, r in enumerate(routes))
    return drain + rtt


def initial_bdp_packets(topo: Topology, route: Route, back_route: Route, wire_bytes: int) -> int:
    """Packets of ``wire_bytes`` in one bandwidth-delay product of ``route``: its first port's speed
    times the round trip without queues, rounded up (at least one)."""
    rate_bytes_per_ps = 1 / topo.net.ps_per_byte[route[0]]
    return max(1, math.ceil(base_rtt_ps(topo, route, back_route, wire_bytes) * rate_bytes_per_ps / wire_bytes))


class SrdFlow(MessageFlow):
    """One SRD-like sender and receiver."""

    def __init__(
        self,
        topo: Topology,
        src: int,
        dst: int,
        message_bytes: Sequence[int],
        params: SrdParams | None = None,
        *,
        start_ps: int = 0,
    ) -> None:
        self.params = params or SrdParams()
        self.payload_bytes = self.params.payload_bytes
        self.header_bytes = self.params.header_bytes
        super().__init__(topo, src, dst, message_bytes, start_ps=start_ps)
        n_paths = len(self.routes) if self.params.num_paths is None else min(self.params.num_paths, len(self.routes))
        if n_paths < 1:
            raise ClusterSimError(
                f"num_paths: {self.params.num_paths} must be at least 1", field="num_paths", value=self.params.num_paths
            )
        self.num_paths = n_paths
        wire = self.params.payload_bytes + self.params.header_bytes
        self.min_rto_ps = ps(self.params.rto_s)
        if self.params.queue_aware_rto:
            self.min_rto_ps = max(self.min_rto_ps, queue_floor_ps(topo, self.routes, self.back_routes, wire))
        self.rto_ps = self.min_rto_ps  # max(the floor, srtt + 4 rttvar) over the flow's samples (RFC 6298's rule)
        self._srtt = 0.0
        self._rttvar = 0.0
        self.target_ps = ps(self.params.target_delay_s)
        self._scaled = self.params.flow_scaling_s > 0
        window = self.params.initial_window
        if self.params.bdp_initial_window:
            window = min(window, initial_bdp_packets(topo, self.routes[0], self.back_routes[0], wire))
        self.cwnd = float(window)
        self._max_window = float(self.params.max_window)
        self.path_inflight = [0] * n_paths
        self.path_packets = [0] * n_paths  # packets sent on each path
        self.path_srtt = [0.0] * n_paths
        self.base_rtt_ps = 0
        self._rr = 0
        self._last_cut_ps = -1
        self._inflight = 0
        self._acked = bytearray()
        self._attempt: list[int] = []
        self._path_of: list[int] = []
        self._retx: deque[int] = deque()
        self._deadlines: deque[tuple[int, int, int]] = deque()  # (deadline_ps, seq, attempt) in send order
        self._timer_at = -1  # when the flow's timer event fires; -1: none pending
        self._next_new = 0
        self._num_acked = 0
        self._cum = 0
        self.out_of_order = 0
        self._highest_seen = -1
        self._rcv_cum = 0
        self._rcv_ooo: set[int] = set()

    # --- sender ---------------------------------------------------------------------------------

    def post(self, now_ps: int) -> list[Event]:
        n = self._end - self._base
        self._acked = bytearray(n)
        self._attempt = [0] * n
        self._path_of = [-1] * n
        self._retx.clear()
        self._deadlines.clear()
        self._next_new = 0
        self._num_acked = 0
        self._cum = 0
        full, last = self.payload_bytes + self.header_bytes, self._end - 1
        # what _pump reads on every call and only changes per message, unpacked there in one go
        self._ctx = (
            self.routes[0][0],
            self.net.busy_until,
            self.net.hop,
            full,
            last,
            self._base,
            n,
            self._retx,
            self._acked,
            self._attempt,
            self._path_of,
            self._deadlines,
        )
        return self._pump(now_ps)

    def _choose_path(self) -> int:
        """The least-loaded of the next ``PATH_PROBES`` paths in round-robin order: packets in flight on
        it times its smoothed round-trip time (a path that timed out counts its RTO)."""
        inflight, srtt, n = self.path_inflight, self.path_srtt, self.num_paths
        p = best = self._rr
        best_score = (inflight[p] + 1) * (srtt[p] or 1.0)
        for _ in range(min(n, PATH_PROBES) - 1):
            p = p + 1 if p + 1 < n else 0
            score = (inflight[p] + 1) * (srtt[p] or 1.0)
            if score < best_score:
                best, best_score = p, score
        self._rr = best + 1 if best + 1 < n else 0
        return best

    def _pump(self, now_ps: int) -> list[Event]:
        events: list[Event] = []
        uplink, busy_until, hop, full, last, base, n, retx, acked, attempts, path_of, deadlines = self._ctx
        path_inflight, path_packets, routes, flow, rto_ps = (
            self.path_inflight,
            self.path_packets,
            self.routes,
            self.flow,
            self.rto_ps,
        )
        inflight, cwnd, sent, multipath, next_new = self._inflight, self.cwnd, 0, self.num_paths > 1, self._next_new
        while inflight < cwnd:
            if retx:
                i = retx.popleft()
                if acked[i]:
                    continue
                self.retransmissions += 1
            elif next_new < n:
                i = next_new
                next_new += 1
            else:
                break
            path = self._choose_path() if multipath else 0
            seq = base + i
            attempt = attempts[i]
            busy = busy_until[uplink]
            packet = (
                flow,
                DATA,
                seq,
                full if seq != last else self.wire_bytes(seq),
                routes[path],
                busy if busy > now_ps else now_ps,  # when it starts on the wire: RTTs leave out the host queue
                path | (attempt << ATTEMPT_SHIFT),
            )
            follow = hop(now_ps, packet)
            if follow:
                events.extend(follow)
            sent += 1
            inflight += 1
            path_inflight[path] += 1
            path_packets[path] += 1
            path_of[i] = path
            deadlines.append((busy_until[uplink] + rto_ps, seq, attempt))
        self._inflight, self._next_new = inflight, next_new
        self.packets_sent += sent
        if self._timer_at < 0:
            self._arm(events)
        return events

    def _arm(self, events: list[Event]) -> None:
        """Drop acknowledged packets from the head of the deadlines; arm the timer at the first live one."""
        deadlines, acked, attempts, base = self._deadlines, self._acked, self._attempt, self._base
        n = self._end - base
        while deadlines:
            _, seq, attempt = deadlines[0]
            i = seq - base
            if 0 <= i < n and not acked[i] and attempts[i] == attempt:  # live: unacknowledged, not resent since
                break
            deadlines.popleft()
        if deadlines:
            self._timer_at = deadlines[0][0]
            events.append((self._timer_at, TIMER_PRIORITY, self._timer, None))

    def on_control(self, now_ps: int, packet: Packet) -> list[Event] | None:
        seq, tag = packet[2], packet[6]
        base = self._base
        n = self._end - base
        i = seq - base
        if i < 0 or i >= n or self._num_acked == n:
            return None
        acked = self._acked
        if not acked[i]:  # _ack_one(i), inlined: the path of every acknowledgement
            acked[i] = 1
            self._num_acked += 1
            path = self._path_of[i]
            if path >= 0:
                self._inflight -= 1
                self.path_inflight[path] -= 1
                self._path_of[i] = -1
            self._on_rtt(now_ps, (tag & 0xFF) % self.num_paths, now_ps - packet[5])
        cum = (tag >> CUM_SHIFT) - base  # everything below it arrived (covers lost ACKs)
        if cum > n:
            cum = n
        j = self._cum
        if j < cum:
            while j < cum:
                if not acked[j]:
                    self._ack_one(j)
                j += 1
            self._cum = j
        if self._num_acked == n:
            return list(self._complete(now_ps) or ())
        return self._pump(now_ps)

    def _ack_one(self, i: int) -> None:
        self._acked[i] = 1
        self._num_acked += 1
        path = self._path_of[i]
        if path >= 0:
            self._inflight -= 1
            self.path_inflight[path] -= 1
            self._path_of[i] = -1

    def _on_rtt(self, now_ps: int, path: int, rtt_ps: int) -> None:
        srtt, rttvar, rtt = self._srtt, self._rttvar, float(rtt_ps)  # exact: an RTT is far below 2**53 ps
        if srtt == 0:
            srtt, rttvar = rtt, rtt / 2
        else:
            deviation = srtt - rtt
            rttvar += ((deviation if deviation > 0 else -deviation) - rttvar) / 4
            srtt += (rtt - srtt) / 8
        self._srtt, self._rttvar = srtt, rttvar
        rto = int(srtt + 4 * rttvar)
        self.rto_ps = rto if rto > self.min_rto_ps else self.min_rto_ps
        path_srtt = self.path_srtt
        srtt = path_srtt[path]
        path_srtt[path] = rtt_ps if srtt == 0 else srtt + (rtt_ps - srtt) / 8
        base = self.base_rtt_ps
        if base == 0 or rtt_ps < base:
            base = self.base_rtt_ps = rtt_ps
        excess = rtt_ps - base - self.target_ps
        if excess > 0 and self._scaled:  # above the full-window target: the window's own target may be higher
            excess = rtt_ps - base - self.params.target_ps(self.cwnd)
        if excess <= 0:
            cwnd = self.cwnd + 1.0 / self.cwnd
            self.cwnd = cwnd if cwnd < self._max_window else self._max_window
        elif now_ps - self._last_cut_ps > base:
            self.cwnd = max(1.0, self.cwnd * (1 - 0.5 * excess / rtt_ps))
            self._last_cut_ps = now_ps

    def _timer(self, now_ps: int, _: object) -> list[Event] | None:
        """The flow's timer: every packet whose deadline has passed unacknowledged is sent again."""
        self._timer_at = -1
        deadlines, acked, attempts, base = self._deadlines, self._acked, self._attempt, self._base
        n = self._end - base
        while deadlines and deadlines[0][0] <= now_ps:
            _, seq, attempt = deadlines.popleft()
            i = seq - base
            if 0 <= i < n and not acked[i] and attempts[i] == attempt:  # live: unacknowledged, not resent since
                self._expire(i)
        events = self._pump(now_ps)
        if self._timer_at < 0:
            self._arm(events)
        return events

    def _expire(self, i: int) -> None:
        self.timeouts += 1
        path = self._path_of[i]
        self._inflight -= 1
        self.path_inflight[path] -= 1
        self._path_of[i] = -1
        self.path_srtt[path] = max(self.path_srtt[path], float(self.rto_ps))  # steer away from a path that lost
        self._attempt[i] += 1
        self._retx.append(i)  # the window is left alone: the congestion control reacts to delay, not loss

    # --- receiver -------------------------------------------------------------------------------

    def on_data(self, now_ps: int, packet: Packet) -> list[Event] | None:
        seq, tag = packet[2], packet[6]
        if seq < self._highest_seen:
            self.out_of_order += 1
        else:
            self._highest_seen = seq
        cum = self._rcv_cum
        if seq == cum:
            cum += 1
            ooo = self._rcv_ooo
            if ooo:
                while cum in ooo:
                    ooo.discard(cum)
                    cum += 1
            self._rcv_cum = cum
        elif seq > cum:
            self._rcv_ooo.add(seq)
        back = self.back_routes
        ack = (
            self.flow,
            ACK,
            seq,
            ACK_BYTES,
            back[(tag & 0xFF) % len(back)],
            packet[5],
            (tag & 0xFFFF) | (cum << CUM_SHIFT),
        )
        self.net.hop(now_ps, ack)  # a route has ports: the hop schedules its own event, returns none
        return None
