"""Background replays that jump over many arrivals at once (``replay.BackgroundReplay``: Lindley's
recursion over running maxima) give the very backlog, drops and next arrival that the one-at-a-time
replay gives, whatever the load, buffer and flow packets in between."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.network.transport.engine import Environment
from clustersim.network.transport.links import Network, PortSpec


def _state(net: Network, port: int) -> tuple[int, ...]:
    bg = net.background[port]
    return net.busy_until[port], net.drops[port], net.bg_packets, net.bg_next_ps[port], bg.at, bg.offset


def _pair(seed: int, load: float, buffer_bytes: float) -> tuple[list[Network], int]:
    nets = []
    for jumps in (False, True):
        net = Network(Environment(seed))
        port = net.add_port(PortSpec(100e9, buffer_bytes=buffer_bytes))
        net.start_background(port, load)
        net.background[port].jumps = jumps
        nets.append(net)
    return nets, port


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 1000),
    load=st.floats(0.05, 0.99),
    buffer_packets=st.one_of(st.none(), st.floats(0.5, 40.0)),
    steps=st.lists(st.tuples(st.floats(0.0, 3000.0), st.integers(0, 30)), min_size=1, max_size=25),
)
def test_jumps_equal_one_arrival_at_a_time(
    seed: int, load: float, buffer_packets: float | None, steps: list[tuple[float, int]]
) -> None:
    """``steps``: (mean gaps until the next flow packet, how many 9 KB packets' worth of service it adds)."""
    nets, port = _pair(seed, load, float("inf") if buffer_packets is None else buffer_packets * 9000)
    now_ps = 0
    gap = nets[0].bg_gap_ps[port]
    for gaps, packets in steps:
        now_ps += int(gaps * gap)
        for net in nets:
            if net.bg_next_ps[port] <= now_ps:
                net._replay_background(port, now_ps)
            # a flow packet joins the backlog, as a hop does
            net.busy_until[port] = max(net.busy_until[port], now_ps) + packets * net.bg_service_ps[port]
        assert _state(nets[0], port) == _state(nets[1], port)


def test_a_long_replay_jumps_across_gap_batches_and_drops() -> None:
    """Past a batch of gaps (8,192) and with a small buffer at 95% load, the two replays still agree."""
    nets, port = _pair(3, 0.95, 5 * 9000)
    for k in range(1, 31):  # 1,000 mean gaps at a time (a replay reaches back at most 2,000)
        for net in nets:
            net._replay_background(port, int(k * 1000 * net.bg_gap_ps[port]))
        assert _state(nets[0], port) == _state(nets[1], port)
    assert nets[0].drops[port] > 0 and nets[0].bg_packets > 8192  # drops, and more arrivals than a batch of gaps
