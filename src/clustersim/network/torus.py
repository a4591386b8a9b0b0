"""Collectives on NeuronLink as the Neuron runtime runs them: a torus inside each instance, a ring
across the instances of a Trn2 UltraServer, and EFA beyond, one stage after the other.

Inside an instance (``neuron-runtime/explore/intranode-collective-comm.rst``, aws-neuron/aws-neuron-sdk
@81ce03ae) the runtime chooses among

* **ring** (KangaRing where several ranks share a chip): the chips in directed cycles that together use
  every NeuronLink of the group's chips ("2 non-overlapping Hamiltonian cycles on 2D Torus" for 16
  chips), one hop per step, ``k - 1`` steps a phase;
* **rdh**, recursive halving and doubling: the 4 x 4 torus seen as a 4-D hypercube, one axis (one
  link) per step, ``log2 k`` steps a phase: fewer hops, a quarter of the links;
* **mesh**: every chip writes straight to every other in one step, routed through the torus, so each
  byte crosses the mean hop distance of the links it shares.

Across instances (``internode-collective-comm.rst``) a collective is hierarchical: an all-reduce is
a reduce-scatter inside the instance, an all-reduce between the chips at the same position of each
instance, and an all-gather inside; all-gather runs the inter-instance stage first, reduce-scatter
last. Each chip has its share of the instance's EFA (trn2: one 200 Gbps card per chip), hops of the
adapter's latency, by ring or rdh. On a Trn2 UltraServer the instances of one server are joined
by the inter-instance NeuronLink ring first.

A phase that leaves each chip with ``D`` bytes of ``k`` chips' data costs ``(k - 1) / k x D / B``
plus its hops, with ``B`` what the algorithm gets of the links at the achieved fraction
(``neuronlink.toml``, priors with their sources); the levels carry ``S``, ``S / chips``, ... . Several
ranks on one chip reduce and duplicate on the chip, inside the ring; a group wholly on one chip moves
its data at the chip's NeuronLink rate (no published figure separates the on-chip DMA rate).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from clustersim.catalog.overlay import CalibrationFile
from clustersim.catalog.tomlfiles import CalibrationEntry
from clustersim.errors import ClusterSimError
from clustersim.network.analytic import (
    Candidate,
    CollectiveTable,
    CommCalibration,
    candidate_time_s,
    default_calibration,
    size_array,
)
from clustersim.network.collectives import Algorithm, Op, Protocol, busbw_factor
from clustersim.network.fabric import Fabric, Torus

FloatArray = npt.NDArray[np.float64]
ENV_VAR = "CLUSTERSIM_NEURONLINK_CALIBRATION"
EFA = "network"  # the EFA stage, named as the analytic model names its network bound
TORUS = "NeuronLink"
ON_CHIP = "NeuronLink (on chip)"
Z_RING = "NeuronLink (UltraServer ring)"


@pydantic_dataclass(frozen=True, slots=True, kw_only=True, config=ConfigDict(extra="forbid"))
class NeuronLinkCalibration:
    """The NeuronLink model's constants (``neuronlink.toml``, each a prior with its source)."""

    link_efficiency: float = Field(gt=0, le=1, description="Achieved fraction of a NeuronLink's bandwidth.")
    hop_latency_s: float = Field(ge=0, description="One step of a NeuronLink algorithm, seconds.")
    base_latency_s: float = Field(ge=0, description="Fixed cost of one collective, seconds.")


CALIBRATION = CalibrationFile(NeuronLinkCalibration, "clustersim.network", "neuronlink.toml", ENV_VAR)


def neuronlink_calibration(extra: Sequence[str | Path] = (), *, use_env: bool = True) -> NeuronLinkCalibration:
    """The packaged constants with the user's files (``CLUSTERSIM_NEURONLINK_CALIBRATION``, then ``extra``)
    over them."""
    return CALIBRATION.calibration(extra, use_env=use_env)


def neuronlink_entries(extra: Sequence[str | Path] = (), *, use_env: bool = True) -> dict[str, CalibrationEntry]:
    """Each constant with its source and file."""
    return CALIBRATION.entries(extra, use_env=use_env)


@dataclass(frozen=True, slots=True)
class Level:
    """One stage of a hierarchical collective: ``members`` chips (or instances) that exchange over
    ``ring_bytes_per_s`` per chip when every link of the stage carries data (ring), ``step_bytes_per_s``
    when one does at a time (rdh), ``mesh_bytes_per_s`` for routed one-step writes (0: no mesh), each
    step costing ``hop_s``."""

    name: str
    members: int
    ring_bytes_per_s: float
    step_bytes_per_s: float
    mesh_bytes_per_s: float
    hop_s: float


def levels(fabric: Fabric, cal: NeuronLinkCalibration, net: CommCalibration) -> list[Level]:
    """The stages of a collective on ``fabric``, innermost first (on one chip, torus, UltraServer ring, EFA)."""
    torus = _torus(fabric)
    link = torus.link_bytes_per_s * cal.link_efficiency / torus.chip_stride
    chips = fabric.devices_per_node // torus.ranks_per_chip
    out: list[Level] = []
    if chips == 1 and torus.ranks_per_chip > 1:
        on_chip = torus.injection_links * torus.link_bytes_per_s * cal.link_efficiency
        out.append(Level(ON_CHIP, torus.ranks_per_chip, on_chip, on_chip, on_chip, cal.hop_latency_s))
    if chips > 1:
        mesh = torus.links_per_chip * link / max(torus.mean_hops / torus.chip_stride, 1.0)
        out.append(Level(TORUS, chips, torus.links_per_chip * link, link, mesh, cal.hop_latency_s))
    nodes = fabric.num_nodes
    if nodes > 1 and torus.ring_nodes > 1:
        ring = min(nodes, torus.ring_nodes)
        if nodes % ring:
            raise ClusterSimError(
                f"{fabric.name}: {nodes} instances do not fill UltraServers of {torus.ring_nodes} "
                f"(give a multiple of {torus.ring_nodes}, or fewer instances of one UltraServer)",
                field="nodes",
                value=nodes,
            )
        z_link = torus.ring_link_bytes_per_s * cal.link_efficiency
        z_links = 2 if ring > 2 else 1
        out.append(Level(Z_RING, ring, z_links * z_link, z_link, 0.0, cal.hop_latency_s))
        nodes //= ring
    if nodes > 1:
        share = fabric.network_bytes_per_s * net.network_efficiency / chips
        out.append(Level(EFA, nodes, share, share, 0.0, fabric.network_latency_s))
    return out


def _torus(fabric: Fabric) -> Torus:
    if fabric.torus is None:
        raise ClusterSimError(f"{fabric.name}: not a NeuronLink torus (the analytic model prices switched fabrics)")
    return fabric.torus


def _choices(level: Level) -> list[tuple[Algorithm, float, float]]:
    """(algorithm, seconds per byte of a phase's ``D``, seconds of a phase) for each way the level can run."""
    k = level.members
    share = (k - 1) / k
    out = [(Algorithm.RING, share / level.ring_bytes_per_s, (k - 1) * level.hop_s)]
    if k & (k - 1) == 0:
        out.append((Algorithm.RDH, share / level.step_bytes_per_s, math.log2(k) * level.hop_s))
    if level.mesh_bytes_per_s > 0:
        out.append((Algorithm.MESH, share / level.mesh_bytes_per_s, level.hop_s))
    return out


def candidates(
    op: Op, fabric: Fabric, cal: NeuronLinkCalibration | None = None, net: CommCalibration | None = None
) -> list[Candidate]:
    """Every way the Neuron runtime could run ``op`` on ``fabric``: each stage by ring, rdh (a power of
    2 members) or mesh (inside an instance), in every combination."""
    cal = CALIBRATION.default() if cal is None else cal
    net = default_calibration() if net is None else net
    stages = levels(fabric, cal, net)
    if not stages:
        raise ClusterSimError(f"{fabric.name}: a collective needs at least 2 devices")
    if op is Op.ALLTOALL:
        return [_alltoall(fabric, stages, cal)]
    if op is Op.SENDRECV:  # one rank to the next: one link of the outermost stage, or its chip's network share
        stage = stages[-1]
        rate = stage.ring_bytes_per_s if stage.name == EFA else stage.step_bytes_per_s
        return [Candidate(Algorithm.DIRECT, Protocol.SIMPLE, rate, stage.hop_s + cal.base_latency_s, stage.name, 0.0)]
    if op in (Op.BROADCAST, Op.REDUCE):  # a pipelined chain: every byte crosses each stage once
        slowest = min(stages, key=lambda s: s.ring_bytes_per_s)
        hops = sum((s.members - 1) * s.hop_s for s in stages) + cal.base_latency_s
        algorithm = Algorithm.HIERARCHICAL if len(stages) > 1 else Algorithm.RING
        return [Candidate(algorithm, Protocol.SIMPLE, slowest.ring_bytes_per_s, hops, slowest.name, 0.0)]
    # All-reduce is a reduce-scatter and an all-gather; each phase leaves a chip of stage i with
    # S / (members of the stages inside it) bytes: S, S / k1, S / (k1 k2), ...
    phases = 2 if op is Op.ALL_REDUCE else 1
    volume = [1.0 / math.prod(s.members for s in stages[:i]) for i in range(len(stages))]
    out: list[Candidate] = []
    for combination in itertools.product(*(_choices(s) for s in stages)):
        per_byte = [phases * c[1] * v for c, v in zip(combination, volume, strict=True)]
        latency = phases * sum(c[2] for c in combination) + cal.base_latency_s
        bound = stages[int(np.argmax(per_byte))].name
        algorithm = combination[-1][0] if len(stages) == 1 else Algorithm.HIERARCHICAL
        out.append(Candidate(algorithm, Protocol.SIMPLE, 1.0 / sum(per_byte), latency, bound, 0.0))
    return out


def _alltoall(fabric: Fabric, stages: list[Level], cal: NeuronLinkCalibration) -> Candidate:
    """Each rank's ``S / n`` to every other rank at once: what a chip sends to the instance's other chips
    routed over its links (mesh), what it sends to other instances over the slowest stage between them."""
    n, per_node = fabric.num_ranks, fabric.devices_per_node
    on_chip = _torus(fabric).ranks_per_chip
    inner = stages[0] if stages[0].mesh_bytes_per_s > 0 else None
    outer = [s for s in stages if s.mesh_bytes_per_s == 0]
    peers = (per_node - on_chip) if per_node > on_chip else on_chip - 1  # a group on one chip: its own cores
    intra = on_chip * peers / n / inner.mesh_bytes_per_s if inner else 0.0
    inter = on_chip * (n - per_node) / n / min(s.ring_bytes_per_s for s in outer) if outer else 0.0
    bound = outer[0].name if outer and inter >= intra else stages[0].name
    latency = sum(s.hop_s for s in stages) + cal.base_latency_s
    return Candidate(Algorithm.MESH, Protocol.SIMPLE, 1.0 / max(intra, inter), latency, bound, 0.0)


def predict_torus(
    op: Op,
    size_bytes: npt.ArrayLike,
    fabric: Fabric,
    *,
    algorithm: Algorithm | None = None,
    protocol: Protocol | None = None,
    cal: NeuronLinkCalibration | None = None,
    net: CommCalibration | None = None,
) -> CollectiveTable:
    """``op`` at each size on a NeuronLink ``fabric``: the fastest way, or the forced algorithm."""
    if protocol is not None:
        raise ClusterSimError(
            f"{op.value} on {fabric.name}: NeuronLink collectives have no NCCL protocols (got {protocol.value}); "
            "give no protocol",
            field="protocol",
            value=protocol.value,
        )
    sizes = size_array(size_bytes)
    everything = candidates(op, fabric, cal, net)
    options = [c for c in everything if algorithm is None or c.algorithm is algorithm]
    if not options:
        valid = ", ".join(sorted({c.algorithm.value for c in everything}))
        raise ClusterSimError(
            f"{op.value} on {fabric.name} cannot use {algorithm.value if algorithm else ''}; valid: {valid}",
            field="algorithm",
            value=algorithm.value if algorithm else None,
        )
    times = np.stack([candidate_time_s(c, sizes) for c in options])
    best = np.argmin(times, axis=0)
    table = CollectiveTable.from_candidates(
        op, fabric, sizes, times[best, np.arange(sizes.size)], [options[i] for i in best]
    )
    limit = torus_link_busbw_limit(op, fabric)
    return dataclasses.replace(table, busbw_exceeds_links=[bool(b > limit) for b in table.busbw_bytes_per_s])


def torus_time_s(
    op: Op,
    size_bytes: npt.ArrayLike,
    fabric: Fabric,
    cal: NeuronLinkCalibration | None = None,
    net: CommCalibration | None = None,
) -> FloatArray:
    """Only the time of the fastest way at each size (what ``predict_torus`` picks)."""
    cal = CALIBRATION.default() if cal is None else cal
    net = default_calibration() if net is None else net
    latency, algbw = _arrays(op, fabric, cal, net)
    sizes = np.maximum(np.atleast_1d(np.asarray(size_bytes, dtype=np.float64)), 1.0)
    return np.asarray((latency + sizes / algbw).min(axis=0), dtype=np.float64)


@functools.lru_cache(maxsize=4096)
def _arrays(op: Op, fabric: Fabric, cal: NeuronLinkCalibration, net: CommCalibration) -> tuple[FloatArray, FloatArray]:
    """Latency and algbw of each way, as columns, remembered per (op, fabric, calibrations): a planner
    prices the same few groups over and over."""
    options = candidates(op, fabric, cal, net)
    return np.array([[c.latency_s] for c in options]), np.array([[c.algbw_bytes_per_s] for c in options])


def torus_link_busbw_limit(op: Op, fabric: Fabric) -> float:
    """The busbw the raw links allow: the fastest way with every link at its full rate and no latency."""
    raw = NeuronLinkCalibration(link_efficiency=1.0, hop_latency_s=0.0, base_latency_s=0.0)
    ideal = dataclasses.replace(default_calibration(), network_efficiency=1.0)
    best = max(c.algbw_bytes_per_s for c in candidates(op, fabric, raw, ideal))
    return best * busbw_factor(op, fabric.num_ranks)
