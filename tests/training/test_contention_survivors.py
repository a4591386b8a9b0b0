"""What mutation testing of ``training.contention`` and ``training.background`` found unpinned: the fabric a
stated oversubscription builds, the seeds a draw runs, the factors' reference, the work bound, the pipeline's
two-rank groups, the refusals' texts; the tenants' window, horizon and sizes, and the reports' fields."""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout
from clustersim.network.collectives import Op
from clustersim.network.cost import ANALYTIC
from clustersim.network.flowsim.engine import FlowTimes, independent
from clustersim.network.flowsim.patterns import Pattern
from clustersim.network.flowsim.routing import Incidence, Routing
from clustersim.network.flowsim.topology import FatTreeSpec, build
from clustersim.system import system_for_accelerator, system_for_instance
from clustersim.training import background as tenants
from clustersim.training.background import (
    Background,
    background_flows,
    first_horizon_s,
    limited,
    other_hosts,
    outlasted,
    parse_background,
    refuse_no_other_hosts,
    run_loaded,
    window_bytes,
)
from clustersim.training.contention import (
    ContendedCost,
    Contention,
    FabricPlacement,
    Loaded,
    contention_factors,
    default_routing,
)
from clustersim.training.job import TrainingJob
from clustersim.workload import zoo

LINE = 1e9  # bytes/s of each NIC in the hand-built trees
DP = ("dp reduce-scatter", "dp all-gather")


@cache
def _setup() -> tuple:
    catalog = load_catalog(use_env=False)
    model = zoo.load_model("llama3-8b", use_env=False)
    system = system_for_instance(catalog, "p5.48xlarge", 8)
    job = TrainingJob(global_batch=64, seq_len=8192, precision=Dtype.BF16)
    return catalog, model, system, job


def _factors(layout: Layout | None = None, **where: object) -> tuple:
    """``contention_factors`` of Llama 3 8B on 8 p5 (TP 8, DP 8 unless ``layout``), on a fabric of 16 hosts of
    radix 8 (four hosts a leaf at 1:1) unless ``where`` says otherwise."""
    catalog, model, system, job = _setup()
    where = {"radix": 8, "fabric_hosts": 16, **where}
    layout = layout or Layout(tp=8, pp=1, dp=8, zero=1, micro_batch=1)
    return contention_factors(model, system, layout, job, catalog, FabricPlacement(**where))  # type: ignore[arg-type]


def test_a_stated_oversubscription_builds_the_fabric_and_each_seed_draws_its_own_hosts():
    """Random hosts hashed onto a 2:1 spine: the fabric run is the stated 2:1 (not the cluster's 1:1), the DP
    collectives take about twice their packed, sprayed, non-blocking time (each seed its own), TP none more."""
    _, drawn, routing, oversubscription = _factors(
        placement="random", routing="ecmp", oversubscription=2.0, seed=3, seeds=3
    )
    assert (routing, oversubscription, drawn.seeds) == ("ecmp", 2.0, (3, 4, 5))
    assert drawn.factors["tp"] == 1.0
    for kind in DP:
        low, high = drawn.spread[kind]
        assert 1.5 < drawn.factors[kind] < 2.5 and low < high  # seeds draw different hosts
    assert _factors()[3] == 1.0  # the cluster's own: non-blocking


def test_packed_hosts_hashed_on_the_same_spine_cost_nothing_where_random_ones_do():
    _, packed, _, _ = _factors(placement="packed", routing="ecmp", oversubscription=2.0, seeds=2)
    _, scattered, _, _ = _factors(placement="random", routing="ecmp", oversubscription=2.0, seeds=2)
    assert all(packed.factors[kind] == pytest.approx(1.0) for kind in DP)
    assert all(scattered.factors[kind] > 1.5 for kind in DP)


def test_a_background_beside_a_packed_sprayed_job_runs_once_per_seed_and_keeps_the_range_without_it():
    """The placement and spraying draw nothing, the background's permutation does: both seeds run with it, and
    the factors without it (one run) stand for both seeds, so their range is a point, not missing."""
    _, drawn, routing, oversubscription = _factors(
        placement="packed", routing="spray", oversubscription=2.0, seeds=2, background=Background(0.5)
    )
    assert (routing, oversubscription, drawn.seeds) == ("spray", 2.0, (0, 1))
    loaded = drawn.loaded
    assert loaded is not None and loaded.hosts == 8 and loaded.background == Background(0.5)
    assert loaded.unloaded == {kind: pytest.approx(1.0) for kind in ("tp", *DP)}
    assert loaded.unloaded_spread == {kind: (loaded.unloaded[kind],) * 2 for kind in ("tp", *DP)}


def test_tenants_on_a_thin_hashed_spine_run_on_the_stated_fabric_and_never_speed_the_step():
    _, drawn, _, oversubscription = _factors(
        placement="random", routing="ecmp", oversubscription=2.0, seeds=2, background=Background(0.5)
    )
    loaded = drawn.loaded
    assert oversubscription == 2.0 and loaded is not None
    for kind in DP:
        assert loaded.unloaded[kind] > 1.5 and drawn.factors[kind] >= loaded.unloaded[kind] - 1e-9
    _, wide, _, _ = _factors(
        placement="random", routing="ecmp", oversubscription=1.0, seeds=2, background=Background(0.5)
    )
    assert wide.factors != drawn.factors  # the tenants ran on the thin spine stated, not the cluster's own


def test_a_zero_share_is_no_background_but_is_reported_as_given():
    _, plain, _, _ = _factors(placement="random", routing="ecmp", oversubscription=2.0, seeds=2)
    _, idle, _, _ = _factors(
        placement="random", routing="ecmp", oversubscription=2.0, seeds=2, background=Background(0.0)
    )
    assert idle.factors == plain.factors and idle.loaded is not None
    assert idle.loaded.background == Background(0.0) and idle.loaded.unloaded == plain.factors


def test_one_other_host_is_room_for_tenants_whose_permutation_then_sends_nothing_between_hosts():
    with pytest.raises(ClusterSimError) as found:
        _factors(fabric_hosts=9, background=Background(0.5))
    assert str(found.value) == (
        "--background: the permutation pattern over 1 other host(s) sends nothing between hosts; give more hosts "
        "(--fabric-hosts) or another pattern"
    )
    assert (found.value.field, found.value.value) == ("--background", "permutation")


def test_a_work_bound_below_the_steps_events_is_refused_naming_the_nodes():
    refused = r"^one training step's groups on 8 nodes: ~4\.92e4 flow-events"  # two runs: placed and reference
    with pytest.raises(ClusterSimError, match=refused) as found:
        _factors(max_events=1)
    assert "more than the given bound of 1 flow-events" in str(found.value)
    assert (found.value.field, found.value.value) == ("--max-events", 1)


def test_pipeline_sends_are_priced_as_groups_of_two_ranks():
    cost, drawn, _, _ = _factors(Layout(tp=8, pp=2, dp=4, zero=1, micro_batch=1))
    _, _, system, _ = _setup()
    sends = [fabric for op, fabric in cost.factors if op is Op.SENDRECV]
    assert len(sends) == 1 and sends[0].num_ranks == 2
    assert sends[0] == system.group_fabric(2, 8)  # the stage's neighbour, tp x dp ranks away
    assert set(drawn.factors) == {"tp", "pp", *DP}


def test_a_system_without_an_instance_has_no_cluster_to_simulate_and_hashes_by_default():
    catalog, model, _, job = _setup()
    bare = system_for_accelerator(catalog, "h100-sxm", devices=64, devices_per_node=8, network_bits_per_s=3.2e12)
    assert bare.instance is None and default_routing(bare) == "ecmp"
    with pytest.raises(ClusterSimError) as found:
        contention_factors(model, bare, Layout(tp=8, dp=8, zero=1, micro_batch=1), job, catalog, FabricPlacement())
    assert str(found.value) == "--network sim needs a catalogued instance: the fabric is the instance's cluster"
    assert found.value.field == "network"


def test_a_contended_cost_scales_its_own_shapes_only():
    _, _, system, _ = _setup()
    fabric = system.group_fabric(8, 8)
    sizes = np.array([1e6, 1e9])
    base = ANALYTIC.time_s(Op.ALL_GATHER, sizes, fabric)
    doubled = ContendedCost({(Op.ALL_GATHER, fabric): 2.0})
    assert doubled.time_s(Op.ALL_GATHER, sizes, fabric) == pytest.approx(2.0 * base, rel=1e-12)
    assert doubled.time_s(Op.REDUCE_SCATTER, sizes, fabric) == pytest.approx(
        ANALYTIC.time_s(Op.REDUCE_SCATTER, sizes, fabric), rel=1e-12
    )


def test_the_reports_name_every_field_and_the_background_beside():
    loaded = Loaded(Background(0.25, Pattern.ALL_TO_ALL), 12, {"dp": 1.5, "tp": 1.0}, {"dp": (1.25, 1.75)})
    found = Contention("random", "ecmp", 2.0, 3, {"dp": 2.0, "tp": 1.0}, 10.0, 12.5, {"dp": (1.5, 2.5)},
                       (3, 4), loaded)  # fmt: skip
    assert found.to_dict() == {
        "model": "sim", "placement": "random", "routing": "ecmp", "oversubscription": 2.0, "seed": 3,
        "seeds": [3, 4], "factors": {"dp": 2.0, "tp": 1.0}, "spread": {"dp": {"min": 1.5, "max": 2.5}},
        "analytic_step_s": 10.0, "step_s": 12.5, "added_fraction": 0.25,
        "background": {"share": 0.25, "pattern": "all_to_all", "hosts": 12, "factors_without": {"dp": 1.5, "tp": 1.0},
                       "spread_without": {"dp": {"min": 1.25, "max": 1.75}}},
    }  # fmt: skip
    assert found.describe() == (
        "network: the flow simulator ran the step's groups on the fabric (random placement, median of seeds 3-4, "
        "ecmp, 2:1 leaf-to-spine) against packed, sprayed and non-blocking: contention adds 25.0% to the step "
        "(10 s analytic -> 12.5 s; dp x2.00 (1.50-2.50), tp x1.00); background: 0.25 of the other hosts' NICs "
        "busy (all-to-all), 12 hosts; without it dp x1.50, tp x1.00 (the factors above are with it)"
    )
    alone = dataclasses.replace(found, loaded=None, spread=None, seeds=(3,))
    assert alone.describe().endswith("(random placement, seed 3, ecmp, 2:1 leaf-to-spine) against packed, sprayed "
                                     "and non-blocking: contention adds 25.0% to the step (10 s analytic -> 12.5 s; "
                                     "dp x2.00, tp x1.00)")  # fmt: skip
    assert dataclasses.replace(loaded, unloaded_spread=None).to_dict()["spread_without"] is None


# ---- the tenants' own flows (training.background) ----


def _two_leaves(oversubscription: float = 3.0):
    spec = FatTreeSpec(num_hosts=8, gpus_per_host=1, nics_per_host=1, nic_bytes_per_s=LINE,
                       scaleup_bytes_per_s=10 * LINE, radix=8, oversubscription=oversubscription)  # fmt: skip
    return build(spec)


def test_the_window_counts_the_jobs_bytes_whole_and_each_tenants_for_its_life_before_the_job_ended():
    """Two job flows end at 2 s; a tenant that sent from 1 s to 5 s counts a quarter of its bytes, one that ended
    at 1.5 s all of them, one that starts after the job none; a resource never carries more than its capacity
    over the window; the times returned are the job's flows'."""
    times = FlowTimes(
        start_s=np.array([0.0, 0.5, 1.0, 0.0, 3.0, 1.8]), tx_end_s=np.array([1.8, 1.9, 5.0, 1.5, 4.0, 2.3]),
        end_s=np.array([1.9, 2.0, 5.1, 1.6, 4.1, 2.4]), resource_bytes=np.zeros(3), peak_utilization=np.zeros(3),
        num_events=0, num_rounds=0, wall_s=0.0,
    )  # fmt: skip
    sizes = np.array([1.0, 2.0, 8.0, 4.0, 16.0, 10.0])
    flows = independent(np.zeros(6, dtype=np.int64), np.ones(6, dtype=np.int64), sizes)
    inc = Incidence(flow=np.arange(6), resource=np.array([0, 0, 1, 1, 2, 2]), weight=np.ones(6),
                    hops=np.zeros(6, dtype=np.int64))  # fmt: skip
    found = window_bytes(times, inc, flows, 2, np.array([1e9, 1e9, 1e9]))
    assert found.resource_bytes == pytest.approx([3.0, 8.0 / 4 + 4.0, 10.0 * 0.2 / 0.5])
    assert found.start_s.tolist() == [0.0, 0.5] and found.tx_end_s.tolist() == [1.8, 1.9]
    assert found.end_s.tolist() == [1.9, 2.0]
    capped = window_bytes(times, inc, flows, 2, np.array([1.0, 1.0, 1.0]))  # 1 B/s over the 2 s window
    assert capped.resource_bytes == pytest.approx([2.0, 2.0, 2.0])


def test_the_first_horizon_is_eight_times_the_busiest_gpus_bytes_at_its_nics_rate():
    tree = build(FatTreeSpec(num_hosts=4, gpus_per_host=4, nics_per_host=2, nic_bytes_per_s=LINE,
                             scaleup_bytes_per_s=LINE))  # fmt: skip
    flows = independent(np.array([0, 0, 5]), np.array([4, 8, 9]), np.array([1e9, 2e9, 1e9]))
    assert first_horizon_s(tree, flows) == pytest.approx(8.0 * 3e9 / (2 * LINE / 4))


def test_a_horizon_too_short_is_doubled_and_past_its_tries_refused(monkeypatch):
    """From the first guess over (1 - share), the horizon doubles until the tenants outlast the job: a guess a
    hundred times too short runs seven doublings; one that never grows enough is refused with the last tried."""
    tree = _two_leaves()
    flows = independent(np.array([0]), np.array([4]), np.array([LINE]))
    others = other_hosts(tree, np.array([0, 4]))
    background = Background(0.5, Pattern.SHIFT)
    tried: list[float] = []
    real_run = tenants.run

    def counting(tree, flows, inc, **kw):
        tried.append(float(flows.size_bytes[1:].max()))
        return real_run(tree, flows, inc, **kw)

    monkeypatch.setattr(tenants, "run", counting)
    monkeypatch.setattr(tenants, "first_horizon_s", lambda tree, flows: 0.01)
    times, _ = run_loaded(limited(tree, others, 0.5), flows, Routing.ECMP, 0, others, background)
    assert times.end_s.max() == pytest.approx(2.0)  # the tenant takes half the uplink throughout
    per_second = 0.5 * LINE  # a tenant's bytes for one second of the horizon
    assert tried == pytest.approx([per_second * 0.02 * 2**k for k in range(len(tried))])
    assert per_second * 0.02 * 2 ** (len(tried) - 2) < 2.0 * per_second <= per_second * 0.02 * 2 ** (len(tried) - 1)
    monkeypatch.setattr(tenants, "first_horizon_s", lambda tree, flows: 1e-9)
    with pytest.raises(ClusterSimError) as found:
        run_loaded(limited(tree, others, 0.5), flows, Routing.ECMP, 0, others, background)
    assert str(found.value) == (
        "--background: the tenants' flows ended before the job's 8 times over (horizon up to 2.56e-07 s); the "
        "job's flows cannot finish beside them"
    )
    assert (found.value.field, found.value.value) == ("--background", 0.5)


def test_tenants_outlast_the_job_even_when_they_end_with_it():
    times = FlowTimes(start_s=np.zeros(3), tx_end_s=np.array([1.0, 2.0, 2.0]), end_s=np.array([1.0, 2.0, 2.5]),
                      resource_bytes=np.zeros(1), peak_utilization=np.zeros(1), num_events=0, num_rounds=0,
                      wall_s=0.0)  # fmt: skip
    assert outlasted(times, 2)  # the tenant stops sending as the job's last byte lands
    assert not outlasted(dataclasses.replace(times, tx_end_s=np.array([1.0, 2.0, 1.9])), 2)


def test_run_loaded_reports_the_jobs_flows_only_with_or_without_tenants_on_its_links():
    """A job crossing the spine beside tenants, and one inside a leaf that no tenant's flow shares: the progress
    counts the job's flows only, up to all of them."""
    tree = _two_leaves()
    across = independent(np.array([0, 1]), np.array([4, 5]), np.array([LINE, LINE]))
    inside = independent(np.array([0]), np.array([1]), np.array([LINE]))
    for flows, job_hosts, background in (
        (across, [0, 1, 4, 5], Background(0.5, Pattern.SHIFT)),
        (inside, [0, 1], Background(0.5)),
    ):
        calls: list[tuple[int, int]] = []
        spare = other_hosts(tree, np.array(job_hosts))
        run_loaded(limited(tree, spare, 0.5), flows, Routing.ECMP, 0, spare, background,
                   progress=lambda done, total, seen=calls: seen.append((done, total)))  # fmt: skip
        n = flows.num_flows
        assert calls and calls[-1] == (n, n) and all(done <= total == n for done, total in calls)


def test_the_tenants_pattern_follows_the_seed_and_is_sized_per_gpu():
    tree = build(FatTreeSpec(num_hosts=8, gpus_per_host=2, nics_per_host=1, nic_bytes_per_s=LINE,
                             scaleup_bytes_per_s=LINE))  # fmt: skip
    others = np.arange(1, 8)
    drawn = [background_flows(tree, others, Background(0.5), 1.0, seed=s, group=3) for s in (0, 1)]
    assert not np.array_equal(drawn[0].dst_gpu, drawn[1].dst_gpu)
    for flows in drawn:
        sent = np.bincount(flows.src_gpu, weights=flows.size_bytes, minlength=16)
        assert sent[flows.src_gpu] == pytest.approx(0.5 * LINE / 2)  # share x NIC / GPUs a host x 1 s
        assert flows.dep_ptr.tolist() == [0] * (flows.num_flows + 1) and flows.dep_idx.size == 0


def test_an_all_to_all_of_too_many_tenants_is_refused_with_its_count_and_the_option():
    tree = build(FatTreeSpec(num_hosts=200, gpus_per_host=8, nics_per_host=1, nic_bytes_per_s=LINE,
                             scaleup_bytes_per_s=LINE))  # fmt: skip
    with pytest.raises(ClusterSimError) as found:
        background_flows(tree, np.arange(1, 200), Background(0.5, Pattern.ALL_TO_ALL), 1.0, seed=0, group=0)
    assert str(found.value) == (
        "--background: an all-to-all of the 199 other hosts' 1,592 GPUs is 2,532,872 flows, more than 2,097,152: "
        "give --fabric-hosts (fewer tenants' hosts) or another pattern"
    )
    assert (found.value.field, found.value.value) == ("--background", "all_to_all")
    largest = background_flows(tree, np.arange(1, 182), Background(0.5, Pattern.ALL_TO_ALL), 1.0, seed=0, group=0)
    assert largest.num_flows == 1448 * 1447 - 181 * 8 * 7  # 1,448 GPUs: 2,095,256 flows, the most allowed
    threes = build(FatTreeSpec(num_hosts=484, gpus_per_host=3, nics_per_host=1, nic_bytes_per_s=LINE,
                               scaleup_bytes_per_s=LINE))  # fmt: skip
    with pytest.raises(ClusterSimError, match="1,449 GPUs is 2,098,152 flows"):  # one GPU more: refused
        background_flows(threes, np.arange(1, 484), Background(0.5, Pattern.ALL_TO_ALL), 1.0, seed=0, group=0)


def test_the_share_bounds_and_refusals_carry_the_text_given():
    assert parse_background("0.99").share == 0.99
    with pytest.raises(ClusterSimError) as found:
        parse_background("1.5:shift")
    assert found.value.value == "1.5:shift"
    with pytest.raises(ClusterSimError) as found:
        parse_background("0.5:flood")
    assert (found.value.field, found.value.value) == ("--background", "0.5:flood")
    with pytest.raises(ClusterSimError) as found:
        refuse_no_other_hosts(8)
    assert found.value.value == 8
    assert Background(0.5, Pattern.ALL_TO_ALL).describe() == "0.5 of the other hosts' NICs busy (all-to-all)"


def test_the_seed_reaches_the_hash_of_the_jobs_and_the_tenants_flows():
    tree = _two_leaves(2.0)
    flows = independent(np.array([0, 1, 2]), np.array([4, 5, 6]), np.array([LINE, LINE, LINE]))
    others = other_hosts(tree, np.array([0, 1, 2, 4, 5, 6]))
    background = Background(0.5, Pattern.SHIFT)  # the same tenants' flows whatever the seed
    routes = [
        run_loaded(limited(tree, others, 0.5), flows, Routing.ECMP, seed, others, background)[1].resource.tolist()
        for seed in range(4)
    ]
    assert len({tuple(r) for r in routes}) > 1


def test_a_stated_routing_reaches_the_tenants_routes():
    """Two uplinks per leaf (2:1): hashed, each flow takes one uplink; sprayed, each loads the leaf's bundle of
    both, so the routes run differ."""
    tree = _two_leaves(2.0)
    flows = independent(np.array([0, 1]), np.array([4, 5]), np.array([LINE, LINE]))
    others = other_hosts(tree, np.array([0, 1, 4, 5]))
    background = Background(0.5, Pattern.SHIFT)
    _, sprayed = run_loaded(limited(tree, others, 0.5), flows, Routing.SPRAY, 0, others, background)
    _, hashed = run_loaded(limited(tree, others, 0.5), flows, Routing.ECMP, 0, others, background)
    assert not np.array_equal(sprayed.resource, hashed.resource)
    leaves = int(tree.nic_leaf.max()) + 1
    single = (hashed.resource >= tree.leaf_up0) & (hashed.resource < tree.leaf_up0 + leaves * tree.leaf_uplinks)
    assert single.any() and not np.isin(hashed.resource[single], sprayed.resource).any()
