"""The speed benchmark's experiment and the simulator's fast paths: the experiment ends at its closed-form
instant in every variant with exactly the work the benchmark counts; a receiver runs in its data's event
only where nothing else sends into its ports, with the same results as in an event of its own; SRD's RTT
estimator, on float arithmetic in its hot path, gives RFC 6298's values exactly."""

import importlib.util
from dataclasses import asdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.network.transport.engine import Environment, ps
from clustersim.network.transport.experiments import Scenario, incast, run_transport
from clustersim.network.transport.links import Network, PortSpec
from clustersim.network.transport.rc import RcFlow
from clustersim.network.transport.srd import SrdFlow, SrdParams
from clustersim.network.transport.topology import FabricSpec, leaf_spine


def _bench():
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_transport.py"
    spec = importlib.util.spec_from_file_location("bench_transport", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = _bench()
N = 300


def _closed_form_finish_ps(num_packets: int) -> int:
    """Line-rate bound (64 packets of 8,276 bytes outlast a round trip): the host port sends the packets
    back to back, the last crosses three more store-and-forward ports and 4 us of wire, and its 84-byte ACK
    four ports and 4 us back."""
    data = (8192 + 84) * 80  # ps at 100 Gbit/s
    ack = 84 * 80
    return num_packets * data + 3 * data + ps(4e-6) + 4 * ack + ps(4e-6)


@pytest.mark.parametrize("variant", ["ours", "ours_per_hop"])
def test_the_benchmark_experiment_ends_at_its_closed_form_with_the_work_it_counts(variant):
    run = getattr(BENCH, variant)(N)
    assert run.finish_ps == _closed_form_finish_ps(N)
    assert run.packet_events == 10 * N
    # ours: the receiver takes a data packet in the event that sent it (every port on the way is fed by
    # one port, the receiver's host port by the receiver alone), its ACK is one event; one event per hop:
    # 4 each way; plus the timer's events
    per_packet = 1 if variant == "ours" else 8
    assert per_packet * N < run.heap_events < per_packet * N + N // 10


def test_simpy_variants_run_the_same_experiment():
    pytest.importorskip("simpy")
    for variant in (BENCH.with_simpy, BENCH.with_simpy_stores):
        run = variant(N)
        assert run.finish_ps == _closed_form_finish_ps(N)
        assert run.packet_events == 10 * N
        assert run.heap_events >= 9 * N  # 8 hops and a timer per packet, at least


def test_measure_interleaves_rounds_and_reports_medians_and_ratios():
    names = ["clustersim", "clustersim, one event per hop"]
    result = BENCH.measure(100, 2, names)
    assert result["finish_ps"] == _closed_form_finish_ps(100)
    assert set(result["variants"]) == set(names)
    ours = result["variants"]["clustersim"]
    assert ours["packet_events_per_s"] == pytest.approx(1000 / ours["cpu_s_median"])
    assert ours["cpu_s_min"] <= ours["cpu_s_median"]
    assert result["ratios"] == {}  # no SimPy variant asked for


def _reference_rto(samples: list[int], min_rto_ps: int) -> tuple[float, float, int]:
    """RFC 6298 (alpha 1/8, beta 1/4, K 4), written plainly on the integer samples."""
    srtt = rttvar = 0.0
    for r in samples:
        if srtt == 0:
            srtt, rttvar = float(r), r / 2
        else:
            rttvar += (abs(srtt - r) - rttvar) / 4
            srtt += (r - srtt) / 8
    return srtt, rttvar, max(min_rto_ps, int(srtt + 4 * rttvar))


@given(samples=st.lists(st.integers(1, 2**45), min_size=1, max_size=30))
@settings(max_examples=60, deadline=None)
def test_srd_rtt_estimator_is_rfc_6298_exactly(samples):
    topo = leaf_spine(Network(Environment()), FabricSpec(), hosts_per_leaf=1)
    flow = SrdFlow(topo, 0, 1, [8192], SrdParams(rto_s=1e-9))
    for t, sample in enumerate(samples):
        flow._on_rtt(t, 0, sample)
    srtt, rttvar, rto = _reference_rto(samples, flow.min_rto_ps)
    assert (flow._srtt, flow._rttvar, flow.rto_ps) == (srtt, rttvar, rto)
    assert flow.base_rtt_ps == min(samples)


def test_a_receiver_runs_inline_only_where_it_alone_sends_into_its_ports():
    net = Network(Environment())
    topo = leaf_spine(net, FabricSpec(), hosts_per_leaf=2, num_paths=2)
    first = SrdFlow(topo, 0, 2, [8192])
    assert net.inline == [True]
    RcFlow(topo, 1, 3, [8192])  # other hosts: both stay inline
    assert net.inline == [True, True]
    # 2 -> 1: host 2 now sends data beside the first flow's ACKs, and this flow's ACKs leave host 1 beside
    # the second flow's data: only the second flow's receiver (host 3) still sends alone
    SrdFlow(topo, 2, 1, [8192])
    assert net.inline == [False, True, False]
    assert first.flow == 0
    # a receiver that may not run inline still counts as sending into its port
    net = Network(Environment())
    topo = leaf_spine(net, FabricSpec(), hosts_per_leaf=1)
    SrdFlow(topo, 0, 1, [8192])
    other = net.add_receiver(lambda now, packet: None)
    net.declare_injection(other, [], [topo.uplinks[1]], answers_only=False)
    assert net.inline == [False, False]
    # without declared routes (one event per hop), nobody runs inline
    bare = Network(Environment())
    port = bare.add_port(PortSpec(1e9))
    flow = bare.add_receiver(lambda now, packet: None)
    bare.declare_injection(flow, [port], [port + 1])
    assert bare.inline == [False]


def _inline_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        Network, "_update_inline", lambda self, flows: self.inline.__setitem__(slice(None), [False] * len(self.inline))
    )


@given(
    transport=st.sampled_from(["srd", "rc", "tcp"]),
    seed=st.integers(0, 1000),
    loss=st.sampled_from([0.0, 0.003, 0.02]),
    background=st.sampled_from([0.0, 0.4]),
    paths=st.integers(1, 4),
)
@settings(max_examples=12, deadline=None)
def test_an_inline_receiver_gives_the_results_of_a_receiver_in_its_own_event(transport, seed, loss, background, paths):
    scenario = Scenario(
        message_bytes=24 << 10,
        num_messages=4,
        num_paths=paths,
        loss=loss,
        background=background,
        seed=seed,
        rc_flow_control="none",  # inline receivers are the lossy network's
    )
    inline = asdict(run_transport(transport, scenario))
    with pytest.MonkeyPatch.context() as patch:
        _inline_off(patch)
        separate = asdict(run_transport(transport, scenario))
    assert inline.pop("num_events") < separate.pop("num_events")
    assert inline == separate


def test_incast_receivers_share_a_port_and_run_in_their_own_events(monkeypatch):
    scenario = Scenario(message_bytes=16 << 10, num_messages=2, loss=0.01, seed=4)
    shared = [asdict(r) for r in incast(scenario, 3, ("srd",))]
    _inline_off(monkeypatch)
    assert shared == [asdict(r) for r in incast(scenario, 3, ("srd",))]  # event counts too: nothing was inline
