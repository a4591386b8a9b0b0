"""The fabric simulator's work estimate (``flowsim.work``), the bound it is refused above
(``network.work.check_work``) and the progress it reports while it runs."""

from __future__ import annotations

import numpy as np
import pytest

from clustersim.errors import ClusterSimError
from clustersim.network.collectives import Op
from clustersim.network.flowsim.cluster import Placement, place_jobs
from clustersim.network.flowsim.collectives import collective_flows
from clustersim.network.flowsim.engine import Flows, independent, simulate
from clustersim.network.flowsim.results import simulate_collective, simulate_jobs
from clustersim.network.flowsim.routing import Routing
from clustersim.network.flowsim.topology import FatTreeSpec, build
from clustersim.network.flowsim.work import (
    DEFAULT_MAX_FLOW_EVENTS,
    EVENTS_PER_LEVEL,
    collective_work,
    dag_levels,
    estimate,
)
from clustersim.network.work import DEFAULT_MAX_SECONDS, MAX_EVENTS_OPTION, MEMORY_BOUND_BYTES, check_work, duration


def _tree(hosts: int = 64):
    spec = FatTreeSpec(
        num_hosts=hosts, gpus_per_host=1, nics_per_host=1, nic_bytes_per_s=1e9, scaleup_bytes_per_s=1e10, radix=8
    )
    return build(spec)


def _chain(n: int) -> Flows:
    """``n`` flows, each waiting on the one before: ``n`` levels."""
    return Flows(
        src_gpu=np.zeros(n, dtype=np.int64),
        dst_gpu=np.ones(n, dtype=np.int64),
        size_bytes=np.ones(n),
        start_at_s=np.zeros(n),
        dep_ptr=np.concatenate([[0], np.arange(n, dtype=np.int64)]),
        dep_idx=np.arange(n - 1, dtype=np.int64),
    )


def test_dag_levels_count_dependency_depth():
    assert dag_levels(independent(np.arange(5), np.arange(5) + 1, np.ones(5))) == 1
    assert dag_levels(_chain(7)) == 7
    assert dag_levels(_chain(1)) == 1


def test_twice_the_jobs_twice_the_flows_and_memory_about_four_times_the_flow_events():
    tree = _tree()
    hosts = np.arange(4)
    one = collective_work(tree, hosts, Op.ALL_REDUCE, 1e9, jobs=4)
    two = collective_work(tree, hosts, Op.ALL_REDUCE, 1e9, jobs=8)
    assert two.memory_bytes == pytest.approx(2 * one.memory_bytes)
    # jobs share each event (J flows) and fall out of step (J events): J**2 plus each job alone (J)
    assert two.events == pytest.approx(one.events * (64 + 8) / (16 + 4))
    assert two.seconds > one.seconds


def test_the_estimate_counts_flows_times_events_per_level():
    tree = _tree()
    plan = collective_flows(tree, np.arange(8), Op.ALL_REDUCE, 1e9, max_steps=2)
    work = collective_work(tree, np.arange(8), Op.ALL_REDUCE, 1e9, max_steps=2)
    levels = dag_levels(plan.flows)
    assert work.events == pytest.approx(plan.flows.num_flows * EVENTS_PER_LEVEL * levels)
    assert collective_work(tree, np.arange(8), Op.ALL_REDUCE, 1e9, max_steps=2, runs=4).events == pytest.approx(
        4 * work.events
    )


def test_the_estimate_bounds_the_events_a_run_makes():
    tree = _tree()
    hosts = np.arange(8)
    work = collective_work(tree, hosts, Op.ALL_REDUCE, 1e9, max_steps=2)
    ran = simulate_collective(tree, hosts, Op.ALL_REDUCE, 1e9, max_steps=2)
    assert ran.num_flows * ran.num_events <= work.events


def test_a_run_over_the_bound_is_refused_naming_the_estimate_the_bound_and_the_option():
    big = estimate(10_000, 20, what="all_reduce, 100 jobs", jobs=100)
    assert big.events > DEFAULT_MAX_FLOW_EVENTS
    with pytest.raises(ClusterSimError) as err:
        check_work(big)
    message = str(err.value)
    assert MAX_EVENTS_OPTION in message and "1e10" in message and "flow-events" in message
    assert f"~{duration(big.seconds)} on a" in message  # the time it would take, too
    assert err.value.field == MAX_EVENTS_OPTION
    check_work(big, max_events=big.events * 1.01)  # the option lifts it
    with pytest.raises(ClusterSimError, match="given bound of 1e3"):
        check_work(estimate(100, 2, what="small"), max_events=1e3)


def test_a_run_of_few_flow_events_but_minutes_of_flows_is_refused_by_default_only():
    slow = estimate(2_000_000, 2, what="many flows", runs=10)
    assert slow.events < DEFAULT_MAX_FLOW_EVENTS and slow.seconds > DEFAULT_MAX_SECONDS
    with pytest.raises(ClusterSimError, match=r"longer than the default bound of 3\.0 min here .*--max-events 3\.2e8"):
        check_work(slow)
    check_work(slow, max_events=3.2e8)


def test_memory_past_the_machine_is_refused_whatever_the_option():
    huge = estimate(5_000_000, 2, what="huge", jobs=1)
    assert huge.memory_bytes > MEMORY_BOUND_BYTES
    with pytest.raises(ClusterSimError, match="GiB of arrays a run may hold"):
        check_work(huge, max_events=1e30)


def test_progress_rises_to_all_flows_done():
    tree = _tree()
    seen: list[tuple[int, int]] = []
    flows = collective_flows(tree, np.arange(8), Op.ALL_REDUCE, 1e9, max_steps=2).flows
    simulate(tree, flows, Routing.SPRAY, progress=lambda d, n: seen.append((d, n)))
    done = [d for d, _ in seen]
    assert done == sorted(done) and done[-1] == flows.num_flows
    assert {n for _, n in seen} == {flows.num_flows}


def test_jobs_report_progress_over_their_runs_alone_and_together():
    tree = _tree()
    jobs = place_jobs(tree, 4, 3, Placement.PACKED)
    seen: list[tuple[int, int]] = []
    simulate_jobs(tree, jobs, Op.ALL_REDUCE, 1e9, max_steps=2, progress=lambda d, n: seen.append((d, n)))
    done = [d for d, _ in seen]
    total = seen[-1][1]
    assert done == sorted(done) and done[-1] == total
    assert {n for _, n in seen} == {total}
