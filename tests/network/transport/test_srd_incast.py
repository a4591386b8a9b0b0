"""SRD under incast: a queue-aware RTO floor and a first window of one bandwidth-delay product. Eight
senders into one receiver behind 4 MB switch buffers queue for up to 320 us and drop nothing, so no
packet may time out; where packets are really lost SRD still resends them and completes."""

import math
from dataclasses import replace

from clustersim.network.transport.engine import Environment, ps
from clustersim.network.transport.experiments import Scenario, incast
from clustersim.network.transport.flows import ACK_BYTES
from clustersim.network.transport.links import Network
from clustersim.network.transport.srd import SrdFlow, SrdParams
from clustersim.network.transport.topology import FabricSpec, leaf_spine

SPEC = FabricSpec(host_bits_per_s=100e9, host_latency_s=1e-6, hop_latency_s=0.5e-6, buffer_bytes=1_000_000)
INCAST = Scenario(buffer_bytes=4e6, message_bytes=256 << 10, num_messages=4, num_paths=16)
WIRE = 8192 + 84


def _flow(params: SrdParams | None = None) -> SrdFlow:
    return SrdFlow(leaf_spine(Network(Environment(1)), SPEC, hosts_per_leaf=1, num_paths=2), 0, 1, [WIRE], params)


def _base_rtt_ps() -> int:
    """Store and forward over 4 ports of 80 ps per byte each way, and 4 us of propagation each way."""
    return 4 * WIRE * 80 + 4 * ACK_BYTES * 80 + 2 * ps(4e-6)


def test_the_rto_floor_is_a_full_buffer_drained_plus_the_round_trip():
    assert _flow().min_rto_ps == 1_000_000 * 80 + _base_rtt_ps()  # 1 MB at 100 Gbit/s: 80 us
    assert _flow(SrdParams(rto_s=1e-3)).min_rto_ps == ps(1e-3)  # a larger stated floor wins
    assert _flow(SrdParams(queue_aware_rto=False)).min_rto_ps == ps(50e-6)


def test_the_first_window_is_one_bandwidth_delay_product():
    assert _flow().cwnd == math.ceil(_base_rtt_ps() / (WIRE * 80)) == 17
    assert _flow(SrdParams(initial_window=8)).cwnd == 8
    assert _flow(SrdParams(bdp_initial_window=False)).cwnd == 64


def test_an_incast_into_4_mb_buffers_has_no_spurious_timeouts():
    """Before the floor (50 us against up to 320 us of queue) this incast timed out 216 times, with
    no drop: every one spurious."""
    for seed in (1, 2):
        (srd,) = incast(replace(INCAST, seed=seed), 8, ("srd",))
        assert (srd.drops, srd.timeouts, srd.retransmissions) == (0, 0, 0)
        ideal_s = 8 * 4 * (256 << 10) * 8 / 100e9 * WIRE / 8192
        assert srd.completion_s < 1.1 * ideal_s


def test_srd_still_recovers_real_losses_in_the_incast():
    (srd,) = incast(replace(INCAST, loss=0.01), 8, ("srd",))
    assert srd.timeouts > 0 and srd.retransmissions > 0
    assert srd.completion_s < 2e-3  # every message delivered (else incast refuses), each loss a floor late
