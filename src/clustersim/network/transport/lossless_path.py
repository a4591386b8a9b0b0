"""The inner loop of ``lossless.LosslessNetwork``: a packet's arrival at a port, the start of a port's
next transmission, and its end, as closures over the network's port lists (no attribute lookups but the
run's counters; two events per packet and port). A packet that finds its port idle, its class's queue
empty and nothing holding it (a pause, missing credit) starts at once, as the queue would have sent it;
a transmission's end is scheduled with the packet itself as its argument (the port is its route's k-th)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from heapq import heappush
from typing import Any

from clustersim.network.transport.engine import PRIORITY_BITS, Event, Stream
from clustersim.network.transport.links import ECN_BIT, MAX_HOPS, Packet, Receiver

Hop = Callable[[int, Packet], "Iterable[Event] | None"]
CONTROL, DATA_CLASS = 0, 1  # traffic classes: strict-priority control, lossless data


def hot_path(net: Any) -> tuple[Callable[[int, int], None], Callable[[int], Hop]]:
    """For ``net``, a ``lossless.LosslessNetwork`` (not imported here: it imports this module):
    ``send(now_ps, port)``, start the port's next packet if it is free (control first, then data
    unless paused or short of credit); ``hop_for(k)``, the handler of a packet reaching the ``k``-th
    node of its route."""
    heap, counter, shift = net.env.heap, net.env.counter, PRIORITY_BITS
    queues, backlog, sending, paused = net.queues, net.backlog_bytes, net.sending, net.paused
    ingress, limit, pause_sent, credits = net.ingress_bytes, net.limit_bytes, net.pause_sent, net.credits
    prop, loss, hops, service = net.prop_ps, net.loss, net.hops, net._service
    drops, losses, bg_at, marks, push = net.drops, net.losses, net._bg_at, net._marks, net._push
    pfc, xoff, xon, ecn, kmin = net.pfc, net.spec.xoff_bytes, net.spec.xon, net.spec.ecn, net.spec.kmin_bytes
    set_pause, credit = net._set_pause, net._credit
    sents: list[Callable[[int, Packet], None]] = []
    receivers: list[tuple[Receiver, Receiver, Receiver, Receiver]] = net.receivers  # by flow and packet kind
    streams: list[Stream | None] = net.streams

    def send(now_ps: int, port: int) -> None:
        control, data = queues[port]
        if control:
            packet, k = control.popleft()
        elif data and not paused[port]:
            packet, k = data[0]
            if not pfc and k + 1 < len(packet[4]) and packet[0] >= 0:
                if credits[port] < packet[3]:
                    return  # blocked until credit returns (LosslessNetwork._credit)
                credits[port] -= packet[3]
            data.popleft()
        else:
            return
        sending[port] = True
        fixed, per_kib = service[port]
        heappush(heap, ((now_ps + fixed + (packet[3] * per_kib >> 10)) << shift, next(counter), sents[k], packet))

    def sent_for(k: int) -> Callable[[int, Packet], None]:
        def sent(now_ps: int, packet: Packet) -> None:
            """``packet`` has left the ``k``-th port of its route: on to the next node, or lost."""
            route, size = packet[4], packet[3]
            port = route[k]
            sending[port] = False
            backlog[port] -= size
            if packet[0] < 0:
                net.bg_packets += 1  # background leaves the simulation here
                bg_at[port].queued -= 1
            else:
                if k and not packet[1]:  # a data packet has left the switch: its ingress link's account falls
                    link = route[k - 1]
                    ingress[link] -= size
                    if not pfc:  # the credit goes back upstream
                        push(now_ps + prop[link], credit, (link, size))
                    elif pause_sent[link] and ingress[link] <= xon:
                        pause_sent[link] = False
                        push(now_ps + prop[link], set_pause, (link, False))
                if loss[port] and streams[port].uniform() < loss[port]:  # type: ignore[union-attr]
                    losses[port] += 1
                    net.in_flight -= 1
                    if not pfc and packet[1] == 0 and k + 1 < len(route):
                        push(now_ps + prop[port], credit, (port, size))  # the next hop discards it
                else:
                    heappush(heap, ((now_ps + prop[port]) << shift, next(counter), hops[k + 1], packet))
            control, data = queues[port]
            if control or data:
                send(now_ps, port)

        return sent

    def hop_for(k: int) -> Hop:
        def hop(now_ps: int, packet: Packet) -> Iterable[Event] | None:
            """A packet reaches the ``k``-th node of its route: its receiver at the end, else port
            ``route[k]``'s queue (a data packet accounted to the link it came over)."""
            route, size = packet[4], packet[3]
            if k == len(route):
                net.in_flight -= 1
                return receivers[packet[0]][packet[1]](now_ps, packet)
            port = route[k]
            if not k:
                net.in_flight += 1
            if bg_at:
                background = bg_at.get(port)
                if background is not None and not background.running:
                    background.wake(now_ps)
            if packet[1]:
                queue = queues[port][CONTROL]
            else:
                queue = queues[port][DATA_CLASS]
                if k:
                    link = route[k - 1]
                    account = ingress[link] + size
                    if account > limit[link]:
                        drops[port] += 1  # headroom overrun: the one drop a lossless fabric can make
                        net.in_flight -= 1
                        return None
                    ingress[link] = account
                    if pfc and account >= xoff and not pause_sent[link]:
                        pause_sent[link] = True
                        net.pause_frames += 1
                        push(now_ps + prop[link], set_pause, (link, True))
                    if ecn and backlog[port] > kmin and marks(port):  # switches mark; a host's queue does not
                        packet = (*packet[:6], packet[6] | ECN_BIT)
                        net.ecn_marks += 1
            backlog[port] += size
            if sending[port]:
                queue.append((packet, k))
                return None
            if not packet[1]:  # (control is never held: an idle port's control queue is empty)
                if queue or paused[port] or (not pfc and k + 1 < len(route) and credits[port] < size):
                    queue.append((packet, k))  # held: behind a held head, paused or short of credit
                    send(now_ps, port)
                    return None
                if not pfc and k + 1 < len(route):
                    credits[port] -= size
            sending[port] = True  # the head of an empty queue on an idle port: it starts now
            fixed, per_kib = service[port]
            heappush(heap, ((now_ps + fixed + (size * per_kib >> 10)) << shift, next(counter), sents[k], packet))
            return None

        return hop

    sents.extend(sent_for(k) for k in range(MAX_HOPS + 1))
    return send, hop_for
