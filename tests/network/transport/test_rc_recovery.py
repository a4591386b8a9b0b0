"""RC's loss recovery: selective repeat (ConnectX-6 Dx/7) resends only what was lost, go-back-N (older
NICs) resends the window behind each loss; NCCL's timeout and retry count are the defaults, and a
queue pair whose retries run out fails the run with one clear line."""

import pytest

from clustersim.errors import ClusterSimError
from clustersim.network.transport.engine import Environment
from clustersim.network.transport.experiments import Scenario, run_transport
from clustersim.network.transport.lossless import LosslessNetwork, LosslessSpec
from clustersim.network.transport.rc import RcFlow, RcParams
from clustersim.network.transport.topology import FabricSpec, leaf_spine


def _lossy_sender(recovery: str, seed: int) -> tuple[RcFlow, int]:
    """Ten 256 KiB messages over a credit fabric whose only loss is 1% of the sender's packets (its
    answers are never lost): the flow and the data packets lost."""
    env = Environment(seed)
    net = LosslessNetwork(env, LosslessSpec(mode="credit"))
    topo = leaf_spine(net, FabricSpec(loss=0.01), hosts_per_leaf=1, num_paths=1)
    net.loss[topo.uplinks[1]] = 0.0
    flow = RcFlow(topo, 0, 1, [256 << 10] * 10, RcParams(recovery=recovery, timeout_exponent=8))
    env.run()
    assert flow.done_ps is not None
    return flow, net.losses[topo.uplinks[0]]


@pytest.mark.parametrize("seed", range(5))
def test_selective_repeat_resends_exactly_the_lost_packets(seed):
    selective, lost = _lossy_sender("selective", seed)
    assert lost > 0 and selective.timeouts == 0  # every loss repaired by a NAK, none by the timer
    assert selective.retransmissions == lost
    go_back, lost_gbn = _lossy_sender("go-back-n", seed)
    assert go_back.retransmissions > 10 * lost_gbn  # the packets in flight behind each loss go again
    assert selective.done_ps < go_back.done_ps  # type: ignore[operator]


def test_nccls_timeout_and_retry_count_are_the_defaults():
    params = RcParams()
    assert params.timeout_exponent == 20 and params.timeout_s == pytest.approx(4.294967296)  # 4.096 us x 2^20
    assert params.retry_count == 7 and params.recovery == "selective"
    assert Scenario().rc_timeout_exponent == 20 and Scenario().rc_retry_count == 7


def test_a_queue_pair_out_of_retries_fails_the_run():
    scenario = Scenario(loss=0.9, message_bytes=64 << 10, num_messages=2, rc_timeout_exponent=0, rc_retry_count=2)
    with pytest.raises(ClusterSimError) as error:
        run_transport("rc", scenario)
    assert "went to the error state: 3 local ACK timeouts of 4.096e-06 s in a row" in str(error.value)
    assert "retry count 2" in str(error.value) and error.value.field == "loss"


@pytest.mark.parametrize(
    ("kwargs", "field", "text"),
    [
        ({"recovery": "sack"}, "recovery", "not one of selective, go-back-n"),
        ({"retry_count": 8}, "retry_count", "3-bit IB retry count (0..7)"),
        ({"timeout_exponent": 32}, "timeout_exponent", "5-bit IB timeout (0..31)"),
    ],
)
def test_bad_rc_settings_are_refused_with_the_field(kwargs, field, text):
    with pytest.raises(ClusterSimError) as error:
        RcParams(**kwargs)
    assert error.value.field == field and text in str(error.value)


@pytest.mark.parametrize(
    ("kwargs", "field", "text"),
    [
        ({"rc_flow_control": "xoff"}, "rc_flow_control", "not one of none, pfc, credit"),
        ({"rc_recovery": "rack"}, "rc_recovery", "not one of selective, go-back-n"),
        ({"rc_flow_control": "credit", "rc_dcqcn": True}, "rc_dcqcn", "valid with rc_flow_control pfc, got credit"),
        ({"rc_flow_control": "none", "rc_dcqcn": True}, "rc_dcqcn", "valid with rc_flow_control pfc, got none"),
    ],
)
def test_impossible_rc_scenarios_are_refused(kwargs, field, text):
    with pytest.raises(ClusterSimError) as error:
        Scenario(**kwargs)
    assert error.value.field == field and text in str(error.value)


def test_dcqcn_is_on_with_pfc_as_deployed_and_off_elsewhere():
    assert Scenario().dcqcn and not Scenario(rc_dcqcn=False).dcqcn
    assert not Scenario(rc_flow_control="credit").dcqcn and not Scenario(rc_flow_control="none").dcqcn


def _pipelined(outstanding: int, seed: int) -> tuple[int, int]:
    """Thirty 16 KiB messages, 3% of the sender's packets lost: the flow's timeouts and finish (ps)."""
    env = Environment(seed)
    net = LosslessNetwork(env, LosslessSpec(mode="credit"))
    topo = leaf_spine(net, FabricSpec(loss=0.03), hosts_per_leaf=1, num_paths=1)
    net.loss[topo.uplinks[1]] = 0.0
    flow = RcFlow(topo, 0, 1, [16 << 10] * 30, RcParams(outstanding=outstanding, timeout_exponent=8))
    env.run()
    assert flow.done_ps is not None and len(flow.completions_ps) == 30
    return flow.timeouts, flow.done_ps


def test_messages_in_flight_let_the_next_message_reveal_a_lost_tail():
    """One message at a time, a lost last packet has nothing behind it to draw a NAK: only the timer finds
    it. With four in flight the next message's packets do, and no round trip is lost between messages."""
    one = [_pipelined(1, seed) for seed in range(6)]
    four = [_pipelined(4, seed) for seed in range(6)]
    assert sum(t for t, _ in four) < sum(t for t, _ in one)
    assert all(f4 < f1 for (_, f4), (_, f1) in zip(four, one, strict=True))
