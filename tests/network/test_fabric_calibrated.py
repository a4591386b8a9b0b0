"""The fabric simulator as nccl-tests would measure it: calibrated links, NCCL's per-step latency and
pipelining (``network.flowsim.nccl``), against the ideal link-bound view and measured busbw."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.cli.app import app
from clustersim.network.analytic import DEFAULT_CALIBRATION, predict_collective
from clustersim.network.collectives import Algorithm, Op
from clustersim.network.flowsim.cluster import Placement, fat_tree_for_instance, place
from clustersim.network.flowsim.collectives import default_algorithm
from clustersim.network.flowsim.engine import Flows, simulate
from clustersim.network.flowsim.nccl import IDEAL, link_model
from clustersim.network.flowsim.results import simulate_collective
from clustersim.network.flowsim.routing import Routing
from clustersim.network.flowsim.topology import FatTreeSpec, build
from clustersim.network.topology import fabric_for_instance
from clustersim.validation.cases import bundled_dir

CATALOG = load_catalog(use_env=False)
MIB = float(1 << 20)
runner = CliRunner()


def _p5(nodes: int, *, fabric_hosts: int = 64, oversubscription: float | None = None):
    tree = fat_tree_for_instance(
        CATALOG, "p5.48xlarge", nodes, fabric_hosts=max(nodes, fabric_hosts), oversubscription=oversubscription
    )
    return tree, place(tree, nodes)


def _busbw(nodes: int, op: Op, size: float, *, ideal: bool = False, algorithm: Algorithm | None = None) -> float:
    tree, hosts = _p5(nodes)
    return simulate_collective(tree, hosts, op, size, algorithm=algorithm, ideal=ideal).busbw_bytes_per_s


def test_the_calibrated_links_are_the_analytic_models_fractions_read_from_its_calibration():
    tree, _ = _p5(2)
    model = link_model(tree.spec)
    assert model.network_efficiency == DEFAULT_CALIBRATION.network_efficiency
    hopper = DEFAULT_CALIBRATION.nvlink_generation.factor("hopper")
    assert model.nvlink_efficiency == pytest.approx(DEFAULT_CALIBRATION.nvlink_efficiency * hopper)
    ran = model.tree(tree, Algorithm.RING)
    assert ran.capacity_bytes_per_s[0] == pytest.approx(tree.capacity_bytes_per_s[0] * model.network_efficiency)
    assert IDEAL.tree(tree, Algorithm.RING) is tree and link_model(tree.spec, ideal=True) is IDEAL


@pytest.mark.parametrize(
    ("op", "size"),
    [(Op.ALL_REDUCE, 4 * MIB), (Op.ALL_REDUCE, 1024 * MIB), (Op.ALL_GATHER, 64 * MIB), (Op.ALLTOALL, MIB)],
)
def test_calibrated_busbw_never_exceeds_the_ideal_links(op: Op, size: float):
    for nodes in (2, 8):
        assert _busbw(nodes, op, size) <= _busbw(nodes, op, size, ideal=True) * (1 + 1e-9)


def test_a_rings_busbw_rises_with_the_message_size_and_reaches_the_calibrated_link_bound():
    sizes = [2.0**k * MIB for k in range(-4, 13, 2)]
    busbw = [_busbw(4, Op.ALL_GATHER, s) for s in sizes]
    assert all(b <= a * (1 + 1e-9) for a, b in zip(busbw[1:], busbw[:-1], strict=True)), busbw
    assert busbw[0] < 0.1 * busbw[-1]  # small messages are latency-bound
    bound = 400e9 * DEFAULT_CALIBRATION.network_efficiency  # 32 x 100 Gb/s at the achieved fraction
    assert 0.9 * bound < busbw[-1] <= bound * (1 + 1e-9)


@pytest.mark.parametrize(("op", "nodes"), [(Op.ALL_GATHER, 4), (Op.REDUCE_SCATTER, 8), (Op.ALLTOALL, 4)])
def test_a_large_message_packed_on_a_non_blocking_fabric_costs_what_the_analytic_model_charges(op: Op, nodes: int):
    size = 4096 * MIB
    tree, hosts = _p5(nodes)
    fabric = fabric_for_instance(CATALOG, "p5.48xlarge", nodes)
    analytic = predict_collective(op, np.array([size]), fabric, algorithm=None).busbw_bytes_per_s[0]
    simulated = simulate_collective(tree, hosts, op, size).busbw_bytes_per_s
    assert simulated == pytest.approx(analytic, rel=0.06)


def test_a_small_message_is_latency_bound_so_doubling_the_ring_steps_doubles_its_time():
    """All-gather of 64 KiB: 31 ring steps on 4 nodes, 63 on 8; NCCL's structure (each step waits
    for the previous one's data and pays its latency) and the price both double."""
    size = 64 * 1024.0
    runs = [simulate_collective(*_p5(n), Op.ALL_GATHER, size) for n in (4, 8)]
    assert runs[1].structure_time_s / runs[0].structure_time_s == pytest.approx(63 / 31, rel=0.1)
    assert runs[1].time_s / runs[0].time_s == pytest.approx(63 / 31, rel=0.1)
    ideal = [simulate_collective(*_p5(n), Op.ALL_GATHER, size, ideal=True) for n in (4, 8)]
    assert all(r.time_s > 20 * i.time_s for r, i in zip(runs, ideal, strict=True))  # no latency when ideal


def test_ideal_is_the_link_bound_view_as_before():
    """Ideal links: a ring all-reduce of p5 nodes at 32 x 100 Gb/s line rate, no latency or ramp."""
    tree, hosts = _p5(4)
    ideal = simulate_collective(tree, hosts, Op.ALL_REDUCE, 64 * MIB, algorithm=Algorithm.RING, ideal=True)
    assert ideal.busbw_bytes_per_s == pytest.approx(400e9, rel=1e-9)
    assert ideal.links == "ideal" and ideal.ramp == "none" and ideal.to_dict()["links"] == "ideal"
    calibrated = simulate_collective(tree, hosts, Op.ALL_REDUCE, 64 * MIB, algorithm=Algorithm.RING)
    assert calibrated.links == "calibrated" and calibrated.ramp in ("simulated", "fitted")
    assert calibrated.time_s >= max(calibrated.structure_time_s, calibrated.fitted_time_s) * (1 - 1e-12)


def test_a_flows_latency_delays_what_waits_for_its_data_and_a_queue_waits_only_for_its_last_byte():
    spec = FatTreeSpec(num_hosts=2, gpus_per_host=1, nics_per_host=1, nic_bytes_per_s=1e9, scaleup_bytes_per_s=1e12)
    tree = build(spec)

    def flows(queue: bool) -> Flows:
        return Flows(
            src_gpu=np.array([0, 0]),
            dst_gpu=np.array([1, 1]),
            size_bytes=np.array([1e9, 1e9]),
            start_at_s=np.zeros(2),
            dep_ptr=np.array([0, 0, 1]),
            dep_idx=np.array([0]),
            latency_s=np.array([0.5, 0.5]),
            dep_queue=np.array([queue]),
        )

    data = simulate(tree, flows(False), Routing.SPRAY)
    assert data.end_s == pytest.approx([1.5, 3.0])  # the second starts when the first has arrived
    queued = simulate(tree, flows(True), Routing.SPRAY)
    assert queued.end_s == pytest.approx([1.5, 2.5])  # the next piece leaves once the first has left


def test_contention_reaches_the_calibrated_answer():
    """Random hosts hashed by ECMP on a 2:1 spine: slower than packed and sprayed, calibrated too."""
    tree, packed = _p5(16, fabric_hosts=256, oversubscription=2)
    size, ring = 256 * MIB, Algorithm.RING
    fast = simulate_collective(tree, packed, Op.ALL_REDUCE, size, algorithm=ring)
    hosts = place(tree, 16, Placement.RANDOM, seed=1)
    slow = simulate_collective(tree, hosts, Op.ALL_REDUCE, size, algorithm=ring, routing=Routing.ECMP, seed=1)
    assert slow.time_s > 1.2 * fast.time_s


def test_sixteen_p5_nodes_all_reduce_one_gib_prints_what_nccl_tests_measure():
    """16 x p5, 1 GiB all-reduce: 269 GB/s measured (crazyguitar/aws-gpu-communication-benchmark);
    the ideal links printed 388.6. NVLS tree, as NCCL's tuner picks it."""
    picked = default_algorithm(Op.ALL_REDUCE, fabric_for_instance(CATALOG, "p5.48xlarge", 16), 1024 * MIB)
    assert picked is Algorithm.NVLSTREE
    calibrated = _busbw(16, Op.ALL_REDUCE, 1024 * MIB, algorithm=picked)
    assert calibrated / 1e9 == pytest.approx(269.23, rel=0.1)
    assert _busbw(16, Op.ALL_REDUCE, 1024 * MIB, ideal=True, algorithm=picked) / 1e9 == pytest.approx(388.6, abs=0.1)


HANDFUL = (
    "p5_all_reduce_2nodes_33554432B_awsome",
    "p5_all_reduce_16nodes_1024MiB",
    "p5_all_reduce_32nodes_8192MiB",
    "p5_all_gather_32nodes_32MiB",
    "p5_all_gather_8nodes_512MiB",
    "p5_alltoall_4nodes_256MiB",
    "p5_alltoall_32nodes_2048MiB",
    "p4de_all_reduce_2nodes_268435456B_awsome",
)


def test_the_simulator_scores_measured_cases_as_well_as_the_analytic_model():
    """A handful of measured cases: the calibrated simulator's MAPE within 2 points of the analytic
    model's, every case within 20%; the ideal links off by more than half."""
    rows = [json.loads(line) for line in (bundled_dir() / "collectives.jsonl").read_text().splitlines() if line]
    cases = {r["id"]: r for r in rows if r["id"] in HANDFUL}
    assert set(cases) == set(HANDFUL)
    errors: dict[str, list[float]] = {"analytic": [], "calibrated": [], "ideal": []}
    for case in cases.values():
        instance, nodes = case["system"]["instance"], case["system"]["nodes"]
        op, size = Op(case["op"]), float(case["size_bytes"])
        tree = fat_tree_for_instance(CATALOG, instance, nodes, fabric_hosts=max(nodes, 64))
        fabric = fabric_for_instance(CATALOG, instance, nodes)
        table = predict_collective(op, np.array([size]), fabric)
        measured = case["measured"]["busbw_GBps"] * 1e9
        errors["analytic"].append(abs(table.busbw_bytes_per_s[0] / measured - 1))
        for name in ("calibrated", "ideal"):
            result = simulate_collective(
                tree, place(tree, nodes), op, size, algorithm=table.algorithm[0], ideal=name == "ideal"
            )
            errors[name].append(abs(result.busbw_bytes_per_s / measured - 1))
    mape = {k: float(np.mean(v)) for k, v in errors.items()}
    assert mape["calibrated"] <= mape["analytic"] + 0.02, mape
    assert max(errors["calibrated"]) < 0.2, errors["calibrated"]
    assert mape["ideal"] > 0.5, mape


def _cli(*args: str) -> dict:
    result = runner.invoke(app, ["fabric", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


BASE = ["--nodes", "4", "--fabric-hosts", "64", "--size", "64M", "--max-steps", "2"]


def test_the_ideal_flag_round_trips_through_every_fabric_command_and_says_which_links_ran():
    calibrated, ideal = _cli("simulate", *BASE), _cli("simulate", *BASE, "--ideal")
    assert (calibrated["links"], ideal["links"]) == ("calibrated", "ideal")
    assert calibrated["busbw_bytes_per_s"] < ideal["busbw_bytes_per_s"] and ideal["ramp"] == "none"
    compare = _cli("compare", *BASE, "--ideal")
    assert compare["links"] == "ideal" and {r["links"] for r in compare["rows"][:4]} == {"ideal"}
    assert _cli("compare", *BASE)["rows"][0]["links"] == "calibrated"
    step = ["step", "llama3-8b", "--nodes", "4", "--fabric-hosts", "64", "--global-batch", "64", "--tp", "8"]
    assert _cli(*step, "--pp", "2")["links"] == "calibrated" and _cli(*step, "--pp", "2", "--ideal")["links"] == "ideal"
    text = runner.invoke(app, ["fabric", "simulate", *BASE, "--ideal"]).output
    assert "links: ideal" in text
    assert "links: calibrated" in runner.invoke(app, ["fabric", "simulate", *BASE]).output
