"""TCP loss recovery with selective acknowledgements, as current stacks run it: a SACK scoreboard
(RFC 2018, 6675), proportional rate reduction (PRR, RFC 6937), and loss detection either by duplicate
threshold (RFC 6675's IsLost: three segments SACKed above a hole, as ns-3 does) or by time (RACK-TLP,
RFC 8985, Linux's default since 4.18 and 5.10: a segment is lost once a segment sent after it has
been delivered and one round trip plus a reordering window has passed; a tail loss probe after two
smoothed round trips without an acknowledgement draws the feedback that repairs a lost tail without
the 200 ms retransmission timeout).

The receiver's acknowledgement carries the segment that triggered it when that segment lies above the
cumulative point: the first SACK block, which RFC 2018 section 4 says must report it. The sender's
scoreboard is the union of these; the later blocks of a real option, which repeat earlier news in
case an acknowledgement is lost, are not modelled (a lost acknowledgement's news then waits for the
cumulative point or the timers). Every acknowledgement echoes its data packet's send time, as the
timestamps option does, so each one is an RTT sample and RACK knows when the delivered copy was sent.

Each segment outstanding is in one state: delivered (SACKed), lost (not yet resent) or in flight, so
the data in the network (RFC 6675's ``pipe``) is the segments outstanding less the SACKed and the lost.
Outside recovery the sender keeps ``pipe`` at the window; in recovery PRR sends, per acknowledgement,
its share of what was delivered (``ssthresh / RecoverFS`` of it while ``pipe`` is above ``ssthresh``,
then up to ``ssthresh`` by slow start), lost segments first, lowest first. Entering recovery cuts the
window at the loss (beta x cwnd, as Linux and ns-3 do), not RFC 5681's FlightSize: a hole that outlives
its episode (a segment sent in it lost) leaves FlightSize counting every segment SACKed above it, so a
reduction from it could leave the window nearly where it was. A timeout marks every
outstanding segment not SACKed as lost and restarts from a window of one (RFC 6675 section 5.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import ceil

from clustersim.network.transport.engine import Event, ps
from clustersim.network.transport.flows import TIMER_PRIORITY
from clustersim.network.transport.links import ECN_BIT, Packet
from clustersim.network.transport.tcp import MAX_RTO_S, TcpFlow, TcpParams
from clustersim.network.transport.topology import Topology

DUP_THRESHOLD = 3  # RFC 6675's DupThresh
NO_RTT_PTO_S = 1.0  # RFC 8985 section 7.2: the probe timeout before any RTT sample
SACK_MASK = ECN_BIT - 1  # the acknowledgement's tag below the ECN bit: the SACKed segment plus one


class SackTcpFlow(TcpFlow):
    """A TCP connection whose sender recovers with SACK and PRR, detecting losses by ``params.recovery``
    ("sack": three segments SACKed above; "rack": RACK-TLP)."""

    recoveries = ("sack", "rack")

    def __init__(
        self,
        topo: Topology,
        src: int,
        dst: int,
        message_bytes: Sequence[int],
        params: TcpParams | None = None,
        *,
        start_ps: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__(topo, src, dst, message_bytes, params, start_ps=start_ps, seed=seed)
        self.rack = self.params.recovery == "rack"
        self.sacked: set[int] = set()
        self.lost: set[int] = set()  # marked lost, not yet resent
        self.resent: set[int] = set()  # resent since recovery (or the timeout) began: RFC 6675 resends a hole once
        self.sent_ps: dict[int, int] = {}  # outstanding segment -> when its latest copy left
        self.rack_sent_ps = -1  # send time and segment of the most recently sent copy delivered
        self.rack_seq = -1
        self.rack_rtt_ps = 0
        self.min_rtt_ps = 0
        self.prr_delivered = self.prr_out = self.recover_fs = 0
        self.quota = 0  # segments PRR lets out on this acknowledgement
        self.probes = 0  # tail loss probes sent
        self._probe_out = False
        self._aux_deadline = 0  # the probe or reordering timer's deadline
        self._aux_event_ps: int | None = None  # when its live event fires (None: none pending)
        self._aux_generation = 0  # events of older generations lapse

    @property
    def pipe(self) -> int:
        """Segments in the network: outstanding, less those SACKed and those marked lost."""
        return self.high_sent - self.snd_una - len(self.sacked) - len(self.lost)

    def _send(self, now_ps: int, seq: int, events: list[Event]) -> None:
        if seq < self.high_sent:
            self.resent.add(seq)
        self.lost.discard(seq)
        self.sent_ps[seq] = now_ps
        super()._send(now_ps, seq, events)

    def _pump(self, now_ps: int) -> list[Event]:
        events: list[Event] = []
        window = int(min(self.cwnd, float(self.params.max_window)))
        budget = self.quota if self.in_recovery else window - self.pipe
        while budget > 0:
            if self.lost:
                self._send(now_ps, min(self.lost), events)
            elif self.snd_nxt < self._end and self.snd_nxt - self.snd_una < self.params.max_window:
                self._send(now_ps, self.snd_nxt, events)
                self.snd_nxt += 1
            else:
                break
            budget -= 1
            if self.in_recovery:
                self.prr_out += 1
                self.quota -= 1
        if not self._timer_armed and self.snd_una < self._end:
            self._timer_armed = True
            events.append((self._deadline, TIMER_PRIORITY, self._timer, None))
        if self.rack and not self.in_recovery and not self._probe_out and self.snd_una < self.high_sent:
            self._arm_aux(now_ps + self._probe_timeout_ps(), events)
        return events

    def _probe_timeout_ps(self) -> int:
        """RFC 8985 section 7.2: two smoothed round trips (one second before any sample), at most the RTO."""
        pto = ps(NO_RTT_PTO_S) if self.srtt_ps == 0 else int(2 * self.srtt_ps)
        return min(pto, self.rto_ps)

    def _arm_aux(self, deadline_ps: int, events: list[Event]) -> None:
        """Set the probe or reordering deadline: a pending event no later than it is moved on lazily (it
        re-arms when it fires early); an earlier deadline gets its own event and the older one lapses."""
        self._aux_deadline = deadline_ps
        if self._aux_event_ps is not None and self._aux_event_ps <= deadline_ps:
            return
        self._aux_generation += 1
        self._aux_event_ps = deadline_ps
        events.append((deadline_ps, TIMER_PRIORITY, self._aux_timer, self._aux_generation))

    def on_control(self, now_ps: int, packet: Packet) -> list[Event] | None:
        if self.done_ps is not None:
            return None
        ack, stamp, sack = packet[2], packet[5], (packet[6] & SACK_MASK) - 1
        events: list[Event] = []
        rtt = now_ps - stamp
        self._on_rtt(rtt)
        self.min_rtt_ps = rtt if self.min_rtt_ps == 0 else min(self.min_rtt_ps, rtt)
        delivered_seq = sack if sack >= ack else ack - 1
        if stamp > self.rack_sent_ps or (stamp == self.rack_sent_ps and delivered_seq > self.rack_seq):
            self.rack_sent_ps, self.rack_seq, self.rack_rtt_ps = stamp, delivered_seq, rtt
        delivered = acked = 0
        if ack > self.snd_una:
            for seq in range(self.snd_una, ack):
                acked += seq not in self.sacked
                self.sacked.discard(seq)
                self.lost.discard(seq)
                self.resent.discard(seq)
                self.sent_ps.pop(seq, None)
            delivered = acked
            self.snd_una = ack
            self.snd_nxt = max(self.snd_nxt, ack)
            self._deadline = now_ps + self.rto_ps
            self._probe_out = False
        if self.snd_una <= sack < self.high_sent and sack not in self.sacked:
            self.sacked.add(sack)
            self.lost.discard(sack)  # delivered after all (it was only late)
            delivered += 1
            self._probe_out = False
        if self.snd_una >= self._end:
            self._after_message()
            return list(self._complete(now_ps) or ())
        self._detect_and_recover(now_ps, delivered, events, sacked_now=delivered > acked)
        if not self.in_recovery and acked:
            self._grow(acked, now_ps)
        events.extend(self._pump(now_ps))
        return events

    def _after_message(self) -> None:
        """The message is acknowledged: nothing is outstanding, so recovery (if any) is over."""
        if self.in_recovery:
            self.in_recovery = False
            self.cwnd = self.ssthresh
        self.sacked.clear()
        self.lost.clear()
        self.resent.clear()
        self.sent_ps.clear()
        self.quota = 0

    def _detect_and_recover(
        self, now_ps: int, delivered: int, events: list[Event], *, sacked_now: bool = False
    ) -> None:
        """Mark losses, enter or leave recovery, and set PRR's quota for this acknowledgement (which SACKs a
        segment newly when ``sacked_now``)."""
        newly_lost = self._detect(now_ps, events) if (self.sacked or self.in_recovery) else False
        if self.in_recovery and self.snd_una > self.recover:
            self.in_recovery = False  # every segment outstanding when recovery began is delivered
            self.cwnd = self.ssthresh
        # a new episode starts on a newly marked loss, or on a SACK while a segment already deemed lost (resent in
        # the last episode: data sent during it) is still outstanding: RFC 6675 section 5 steps (1)-(2) count such
        # duplicate ACKs afresh once recovery ends, Linux enters recovery while lost_out > 0, ns-3 likewise
        if (
            (newly_lost or (sacked_now and self._loss_outstanding()))
            and not self.in_recovery
            and self.snd_una > self.recover
        ):
            flight = self.high_sent - self.snd_una
            # the reduction applies to the window at the loss (Linux: tcp_reno_ssthresh, bictcp_recalc_ssthresh)
            # or to pipe (ns-3's NewReno), not to FlightSize, which after a hole outlives its recovery counts the
            # segments SACKed above it; never more than FlightSize (RFC 9438 section 4.6, where cwnd is used)
            window = self.pipe if self.params.reduction_basis == "pipe" else int(self.cwnd)
            self.ssthresh = self._reduced(min(flight, window))
            self.recover = self.high_sent - 1
            self.in_recovery = True
            self.prr_delivered = self.prr_out = 0
            self.recover_fs = flight  # RFC 6937: snd.nxt - snd.una (ns-3 likewise)
            self.resent.clear()
        if self.in_recovery:
            self.prr_delivered += delivered
            pipe = self.pipe
            if pipe > self.ssthresh:  # proportional: ssthresh / RecoverFS of what was delivered
                quota = ceil(self.prr_delivered * self.ssthresh / self.recover_fs) - self.prr_out
            else:  # slow-start reduction bound: back up to ssthresh, at most one more than delivered
                quota = min(int(self.ssthresh) - pipe, max(self.prr_delivered - self.prr_out, delivered) + 1)
            if self.prr_out == 0 and self.lost:
                quota = max(quota, 1)  # the fast retransmit goes out on entering recovery
            self.quota = max(quota, 0)
            self.cwnd = float(pipe + self.quota)

    def _loss_outstanding(self) -> bool:
        """Whether a segment deemed lost is still outstanding: marked lost, or resent and neither SACKed nor
        acknowledged."""
        return bool(self.lost) or any(seq not in self.sacked for seq in self.resent)

    def _detect(self, now_ps: int, events: list[Event]) -> bool:
        """Mark the segments now deemed lost; with RACK, arm the reordering timer for the earliest one
        not yet due. Returns whether any was marked."""
        marked = False
        if not self.rack:
            above = 0
            for seq in range(self.high_sent - 1, self.snd_una - 1, -1):
                if seq in self.sacked:
                    above += 1
                elif above >= DUP_THRESHOLD and seq not in self.lost and seq not in self.resent:
                    self.lost.add(seq)  # a hole resent in this recovery is not marked again (the timer's)
                    marked = True
            return marked
        if self.rack_sent_ps < 0:
            return False
        wait = self.rack_rtt_ps + self.min_rtt_ps // 4  # RACK.rtt + RACK.reo_wnd (min_rtt / 4)
        due = None
        for seq in range(self.snd_una, self.high_sent):
            if seq in self.sacked or seq in self.lost:
                continue
            sent = self.sent_ps.get(seq)
            if sent is None or sent > self.rack_sent_ps or (sent == self.rack_sent_ps and seq >= self.rack_seq):
                continue  # sent after the most recently sent copy delivered: no evidence yet
            left = sent + wait - now_ps
            if left <= 0:
                self.lost.add(seq)
                marked = True
            elif due is None or left < due:
                due = left
        if due is not None:
            self._arm_aux(now_ps + due, events)
        return marked

    def _aux_timer(self, now_ps: int, generation: object) -> list[Event] | None:
        if generation != self._aux_generation:
            return None  # an earlier deadline replaced this event
        self._aux_event_ps = None
        if self.done_ps is not None or self.snd_una >= self._end:
            return None
        events: list[Event] = []
        if now_ps < self._aux_deadline:
            self._arm_aux(self._aux_deadline, events)
            return events
        if self.sacked or self.in_recovery:  # the reordering timer: losses may be due now
            lost_before = len(self.lost)
            self._detect_and_recover(now_ps, 0, events)
            if self.in_recovery or len(self.lost) > lost_before:
                events.extend(self._pump(now_ps))
                return events
        if self.snd_una < self.high_sent and not self._probe_out:  # the tail loss probe (nothing was due)
            self._probe_out = True
            self.probes += 1
            if self.snd_nxt < self._end and self.snd_nxt - self.snd_una < self.params.max_window:
                self._send(now_ps, self.snd_nxt, events)
                self.snd_nxt += 1
            else:
                self._send(now_ps, self.high_sent - 1, events)
            self._deadline = now_ps + self.rto_ps
        return events

    def _on_timeout(self, now_ps: int) -> list[Event]:
        """RFC 6675 section 5.1: every outstanding segment not SACKed is lost; restart from a window of one."""
        self.ssthresh = self._reduced(self.high_sent - self.snd_una)
        self.cwnd = 1.0
        self.in_recovery = False
        self.recover = self.high_sent - 1
        self.lost = {s for s in range(self.snd_una, self.high_sent) if s not in self.sacked}
        self.resent.clear()
        self.rto_ps = min(2 * self.rto_ps, ps(MAX_RTO_S))
        self._deadline = now_ps + self.rto_ps
        self._probe_out = True  # no probe until an acknowledgement shows progress
        return self._pump(now_ps)


def tcp_flow(
    topo: Topology,
    src: int,
    dst: int,
    message_bytes: Sequence[int],
    params: TcpParams | None = None,
    *,
    start_ps: int = 0,
    seed: int = 0,
) -> TcpFlow:
    """The TCP connection that ``params.recovery`` names (default: Linux's, CUBIC with RACK-TLP)."""
    params = params or TcpParams()
    kind = TcpFlow if params.recovery in TcpFlow.recoveries else SackTcpFlow
    return kind(topo, src, dst, message_bytes, params, start_ps=start_ps, seed=seed)
