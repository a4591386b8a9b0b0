"""Extreme scenarios of the packet simulator: loss so high a transport cannot deliver within the
simulated horizon, and a negative seed; each a one-line refusal, never a KeyError or a ValueError."""

import pytest

from clustersim.errors import ClusterSimError
from clustersim.network.transport.experiments import Scenario, incast, run_transport


def test_a_transport_that_cannot_deliver_within_the_horizon_is_refused_naming_it():
    scenario = Scenario(loss=0.9, num_messages=20, line_bits_per_s=400e9)
    with pytest.raises(ClusterSimError, match=r"tcp: .* of 20 messages delivered") as err:
        run_transport("tcp", scenario)
    assert "simulated" in str(err.value) and err.value.field == "loss"


def test_high_loss_that_srd_survives_is_still_an_answer():
    result = run_transport("srd", Scenario(loss=0.9, num_messages=5, line_bits_per_s=400e9))
    assert result.num_messages == 5 and result.timeouts > 0


def test_incast_that_cannot_deliver_is_refused():
    with pytest.raises(ClusterSimError, match=r"tcp: .* delivered"):
        incast(Scenario(loss=0.9, num_messages=20, message_bytes=1 << 20), 2, transports=("tcp",))


@pytest.mark.parametrize("seed", [-1, -(2**70)])
def test_a_negative_seed_is_refused(seed):
    with pytest.raises(ClusterSimError, match="seed") as err:
        Scenario(seed=seed)
    assert err.value.field == "seed"


def test_a_run_past_its_event_budget_is_refused_not_left_running(monkeypatch):
    import clustersim.network.transport.experiments as experiments

    monkeypatch.setattr(experiments, "MIN_EVENT_BUDGET", 1000)
    monkeypatch.setattr(experiments, "EVENT_BUDGET_FACTOR", 1)
    with pytest.raises(ClusterSimError, match="budget of a run this size"):
        run_transport("rc", Scenario(loss=0.5, num_messages=20))
