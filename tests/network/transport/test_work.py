"""The packet simulator's work estimate (``transport.work``) and the progress its environments report
(``engine.reporting``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clustersim.errors import ClusterSimError
from clustersim.network.transport.engine import REPORT_EVERY, Environment, reporting
from clustersim.network.transport.experiments import Scenario, compare
from clustersim.network.transport.work import (
    DEFAULT_MAX_PACKET_EVENTS,
    EVENTS_PER_PACKET,
    LOSSLESS_RC_EVENTS_PER_PACKET,
    packets,
    transport_work,
)
from clustersim.network.work import MAX_EVENTS_OPTION, check_work


def test_packets_are_messages_cut_at_each_transports_payload():
    assert packets(8192, "srd") == 1 and packets(8193, "srd") == 2
    assert packets(8192, "rc") == 2 and packets(1, "tcp") == 1
    work = transport_work(1 << 20, 10, lossless_rc=False)
    assert work.events == pytest.approx(EVENTS_PER_PACKET * 10 * (128 + 256 + 118))
    lossless = transport_work(1 << 20, 10)  # RC's lossless links: an event per hop and per transmission
    assert lossless.events == pytest.approx(EVENTS_PER_PACKET * 10 * (128 + 118) + LOSSLESS_RC_EVENTS_PER_PACKET * 2560)


def test_the_estimate_scales_with_messages_flows_and_points():
    one = transport_work(1 << 20, 100)
    assert transport_work(1 << 20, 200).events == pytest.approx(2 * one.events)
    assert transport_work(1 << 20, 100, flows=8).events == pytest.approx(8 * one.events)
    assert transport_work(1 << 20, 100, runs=3).events == pytest.approx(3 * one.events)
    assert transport_work(2 << 20, 100).seconds == pytest.approx(2 * one.seconds, rel=0.01)  # TCP rounds up


def test_the_estimate_is_near_the_events_a_run_makes():
    scenario = Scenario(message_bytes=64 << 10, num_messages=20)
    ran = sum(r.num_events for r in compare(scenario))
    assert 0.7 < transport_work(64 << 10, 20).events / ran < 1.5
    lossy = replace(scenario, rc_flow_control="none")
    ran = sum(r.num_events for r in compare(lossy))
    assert 0.7 < transport_work(64 << 10, 20, lossless_rc=False).events / ran < 1.5


def test_a_gigabyte_run_is_refused_by_default_and_the_option_lifts_it():
    big = transport_work(1 << 30, 16, lossless_rc=False)
    assert big.events > DEFAULT_MAX_PACKET_EVENTS
    with pytest.raises(ClusterSimError) as err:
        check_work(big)
    assert f"pass {MAX_EVENTS_OPTION} 2.9e7" in str(err.value) and "min" in str(err.value)
    check_work(big, max_events=3e7)


def test_reporting_hears_every_event_in_rising_chunks():
    heard: list[int] = []
    env = Environment(0)
    n = 3 * REPORT_EVERY + 5
    for t in range(n):
        env.schedule(t, lambda _t, _a: None)
    with reporting(heard.append):
        assert env.run() == n
    assert sum(heard) == n and heard[:3] == [REPORT_EVERY] * 3 and heard[-1] == 5
    env.schedule(env.now_ps, lambda _t, _a: None)
    env.run()  # outside reporting: nothing heard
    assert sum(heard) == n


def test_reporting_keeps_a_bounded_run_bounded():
    heard: list[int] = []
    env = Environment(0)
    for t in range(100):
        env.schedule(t, lambda _t, _a: None)
    with reporting(heard.append):
        assert env.run(max_events=40) == 40
        assert env.run(until_ps=59) == 20
    assert sum(heard) == 60 and env.pending == 40


def test_a_compare_reports_its_progress():
    heard: list[int] = []
    scenario = Scenario(message_bytes=1 << 20, num_messages=40)
    with reporting(heard.append):
        results = compare(scenario)
    assert sum(heard) == sum(r.num_events for r in results)
