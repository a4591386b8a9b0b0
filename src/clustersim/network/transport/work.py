"""The packet simulator's work, estimated from its inputs before it runs (``network.work``).

Packets are each flow's messages cut at the transport's MTU payload (SRD 8 KiB, RC 4 KiB, TCP's MSS),
for every transport run; each packet makes about ``EVENTS_PER_PACKET`` events (its hops and its ack).
Measured on the reference machine (2 cores, 24 GiB) with ``transport compare --json``: 3.0 events a
packet without loss (SRD, RC and TCP alike), 4.0 for RC at 1% loss and 50% background load; 1.6e5
events a second (``--message 1G --messages 16``: ~2.5e7 events in 156 s). The heap holds a window of
packets per flow, so memory is not what bounds a run: time is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from clustersim.network.transport.rc import RcParams
from clustersim.network.transport.srd import SrdParams
from clustersim.network.transport.tcp import TcpParams
from clustersim.network.work import WorkEstimate

EVENTS_PER_PACKET = 3.5
# RC on lossless links (lossless.py): every hop is two events (arrival, end of transmission) for the data
# and for its acknowledgement, plus a pacing event (DCQCN) or a credit return: measured 17 (PFC and DCQCN)
# and 19 (credits) a packet with ``transport compare --message 64K --messages 20``
LOSSLESS_RC_EVENTS_PER_PACKET = 18.0
PACKET_EVENTS_PER_S = 1.6e5
DEFAULT_MAX_PACKET_EVENTS = 2e7  # ~2 min on the reference machine
PAYLOAD_BYTES = {
    "srd": SrdParams().payload_bytes,
    "rc": RcParams().payload_bytes,
    "tcp": TcpParams().payload_bytes,
}
BYTES_PER_FLOW = 1 << 20  # a flow's window of packets in the heap, and its records (a bound)


def packets(message_bytes: int, transport: str) -> int:
    """The packets one message of ``message_bytes`` takes over ``transport``."""
    return max(1, math.ceil(message_bytes / PAYLOAD_BYTES[transport]))


def _events_per_packet(transport: str, lossless_rc: bool) -> float:
    return LOSSLESS_RC_EVENTS_PER_PACKET if transport == "rc" and lossless_rc else EVENTS_PER_PACKET


def transport_work(
    message_bytes: int,
    messages: int,
    *,
    transports: Sequence[str] = ("srd", "rc", "tcp"),
    flows: int = 1,
    runs: int = 1,
    what: str = "",
    lossless_rc: bool = True,
) -> WorkEstimate:
    """The work of ``runs`` runs (sweep points, seeds) of each of ``transports``, ``flows`` flows of
    ``messages`` messages of ``message_bytes`` each (RC on lossless links unless ``lossless_rc`` is off)."""
    per_run = flows * messages
    count = runs * per_run * sum(packets(message_bytes, t) for t in transports)
    events = runs * per_run * sum(_events_per_packet(t, lossless_rc) * packets(message_bytes, t) for t in transports)
    shape = (
        f"{flows:,} flows x {messages:,} x {message_bytes:,} B" if flows > 1 else f"{messages:,} x {message_bytes:,} B"
    )
    label = what or f"{shape} over {', '.join(transports)}" + (f", {runs} runs" if runs > 1 else "")
    return WorkEstimate(
        what=f"{label}: {count:,} packets",
        events=events,
        unit="packet events",
        seconds=events / PACKET_EVENTS_PER_S,
        memory_bytes=float(flows * len(transports) * BYTES_PER_FLOW),
        default_bound=DEFAULT_MAX_PACKET_EVENTS,
    )
