"""What the three transports share: a flow that sends a list of messages one after another from one
host to another, each posted when the previous one completes (every byte acknowledged to the sender),
and the counters read after the run."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from clustersim.errors import ClusterSimError
from clustersim.network.transport.engine import Event
from clustersim.network.transport.links import Packet
from clustersim.network.transport.topology import Route, Topology

DATA = 0
ACK = 1
NAK = 2
CNP = 3  # a congestion notification (DCQCN), receiver to sender
TIMER_PRIORITY = 1  # at one instant, packets are handled before timers
ACK_BYTES = 84  # an acknowledgement on the wire: headers and framing, no payload (Ethernet minimum + preamble)


class MessageFlow:
    """A sender at host ``src`` and its receiver at host ``dst``: messages of ``message_bytes`` each,
    one after another from ``start_ps``; subclasses move the packets."""

    payload_bytes: int = 8192
    header_bytes: int = 84
    # the receiver's on_data reads only the receiver's own state, sets no timer and sends only answers on
    # the back routes, and the sender reads the receiver's state only through them: the network may then
    # run it in the event its data leaves the last port (Network.declare_injection)
    receiver_answers_only: bool = True

    def __init__(self, topo: Topology, src: int, dst: int, message_bytes: Sequence[int], *, start_ps: int = 0) -> None:
        if not message_bytes:
            raise ClusterSimError("a flow needs at least one message", field="message_bytes", value=list(message_bytes))
        for size in message_bytes:
            if size < 1:
                raise ClusterSimError(f"message size {size} must be at least 1 byte", field="message_bytes", value=size)
        self.topo = topo
        self.net = topo.net
        self.env = topo.net.env
        self.routes: tuple[Route, ...] = topo.routes(src, dst)
        self.back_routes: tuple[Route, ...] = topo.routes(dst, src)
        self.sizes = list(message_bytes)
        self.flow = self.net.add_receiver(self.on_data, self.on_control)
        self.net.declare_injection(
            self.flow,
            {r[0] for r in self.routes},
            {r[0] for r in self.back_routes},
            answers_only=self.receiver_answers_only,
        )
        self.completions_ps: list[int] = []
        self.message_timeouts: list[int] = []  # retransmission timeouts that fired during each message
        self.retransmissions = 0
        self.timeouts = 0
        self.packets_sent = 0
        self.done_ps: int | None = None
        self.failure: str | None = None  # why the flow gave up (an RC queue pair's retries exhausted)
        self._message = -1
        self._timeouts_before = 0
        self._posted_ps = 0
        self._base = 0  # global sequence number of the current message's first packet
        self._end = 0  # one past its last packet
        self.env.schedule(start_ps, self._next_message)

    def num_packets(self, size: int) -> int:
        """Packets a message of ``size`` bytes is cut into."""
        return -(-size // self.payload_bytes)

    def wire_bytes(self, seq: int) -> int:
        """Bytes on the wire of data packet ``seq`` of the current message (the last one may be short)."""
        if seq == self._end - 1:
            last = self.sizes[self._message] - (self._end - 1 - self._base) * self.payload_bytes
            return last + self.header_bytes
        return self.payload_bytes + self.header_bytes

    def _next_message(self, now_ps: int, _: object = None) -> Iterable[Event] | None:
        self._message += 1
        if self._message == len(self.sizes):
            self.done_ps = now_ps
            return None
        self._posted_ps = now_ps
        self._timeouts_before = self.timeouts
        self._base = self._end
        self._end = self._base + self.num_packets(self.sizes[self._message])
        return self.post(now_ps)

    def _complete(self, now_ps: int) -> Iterable[Event] | None:
        self.completions_ps.append(now_ps - self._posted_ps)
        self.message_timeouts.append(self.timeouts - self._timeouts_before)
        return self._next_message(now_ps)

    def post(self, now_ps: int) -> Iterable[Event] | None:
        """Start sending the current message."""
        raise NotImplementedError

    def on_data(self, now_ps: int, packet: Packet) -> Iterable[Event] | None:
        """The receiver's handling of a data packet."""
        raise NotImplementedError

    def on_control(self, now_ps: int, packet: Packet) -> Iterable[Event] | None:
        """The sender's handling of an acknowledgement (or NAK); one that arrives after the last
        message has completed is ignored."""
        raise NotImplementedError
