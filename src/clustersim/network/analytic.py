"""Analytic cost of NCCL collectives: latency + bytes / achieved bandwidth, per algorithm and protocol.

For each candidate (algorithm, protocol) the model takes

* a bandwidth bound from the links the algorithm crosses (NVLink per device, the node's network
  cards, NVLink SHARP for NVLS), times an achieved fraction of the datasheet figure;
* a latency assembled as NCCL's tuner does (``src/graph/tuning.cc``: base + per-hop latency on
  NVLink and the network; constants in ../shared/reference/network.md section 1.2), where every
  network hop also pays the adapter's per-message latency (``Fabric.network_latency_s``, NCCL's
  ``latencyInter``: 0 for InfiniBand, whose figures the tables already hold; about 20 us on EFA),
  and a Simple hop once more where the receiver flushes GPUDirect writes (``network_flush``: GPUs
  before Hopper and C2C superchips, NCCL's ``ncclTopoNeedFlush``; its tuner charges this "flush");
* LL and LL128 only where the adapter delivers 128-byte writes in order (``network_ll_protocols``:
  not EFA v1, where aws-ofi-nccl sets ``NCCL_PROTO=simple``); inside a node always;
* for the Simple protocol, a message-size efficiency ``1 / (1 + (S_half / S) ** p)`` that captures
  NCCL's ramp (fewer channels and a pipeline to fill on small messages); ``S_half`` is a size, the
  bytes NCCL's channels must have in flight, growing with the node count, the same on a slow
  network as on a fast one, which spends longer filling it (2 x p4de and 2 x p5, 7x apart in
  bandwidth, reach half their peak all-reduce busbw at 32 and ~90 MiB, not 7x apart as a ramp in
  time would have them). These few parameters are fitted once
  to measured busbw (``benchmarks/calibrate_collectives.py``, which writes them into
  ``calibration.toml`` beside this module, each with its source); ``CommCalibration`` holds them.
  A user's file (``CLUSTERSIM_COLLECTIVE_CALIBRATION``, paths separated by ``os.pathsep``, or
  ``extra=``) replaces the fields it gives.

NVLS and NVLS tree (NVLink SHARP in the switch, one domain or a tree across domains, NVL72 racks
included) take NCCL's loops, heads and per-generation constants from ``clustersim.network.nvls``.

Arrays of sizes are evaluated at once; the automatic choice is the fastest candidate by NCCL's price,
as NCCL's tuner picks the fastest predicted one. The price is what a candidate achieves, except NVLS
tree on a multi-node NVLink domain, which NCCL prices above what it achieves (``Candidate.choice_*``).
"""

from __future__ import annotations

import functools
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
from clustersim.network.collectives import Algorithm, Op, Protocol, busbw_factor
from clustersim.network.fabric import Fabric
from clustersim.network.nvls import PerGeneration, nvls_heads, nvls_ramp_bytes, nvls_tree

FloatArray = npt.NDArray[np.float64]
# latency, algbw, ramp size, and the algbw and ramp size NCCL chooses by (the same arrays where they agree)
Arrays = tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]
ENV_VAR = "CLUSTERSIM_COLLECTIVE_CALIBRATION"
CALIBRATION_FILE = "calibration.toml"

_US = 1e-6
# NCCL 2.30 tuning.cc baseLatencies [LL, LL128, Simple], microseconds.
_BASE_US = {Algorithm.TREE: (6.8, 14.0, 8.4), Algorithm.RING: (6.6, 14.0, 8.4)}
# hwLatencies per hop [LL, LL128, Simple], microseconds: NVLink and network.
_NVLINK_US = {Algorithm.TREE: (0.6, 1.25, 4.0), Algorithm.RING: (0.6, 1.9, 3.4)}
_NET_US = {Algorithm.TREE: (5.0, 8.5, 14.0), Algorithm.RING: (2.7, 4.0, 14.0)}
_NVLS_NVLINK_US = 25.0  # NVLS / NVLSTree Simple over NVLink
_NVLSTREE_NET_US = 20.9  # NVLSTree Simple over the network
_NET_OVERHEAD_US = 2.0  # NCCL netOverhead on AMD hosts (1.0 on Intel), x3 for Simple
_PROTOCOL_INDEX = {Protocol.LL: 0, Protocol.LL128: 1, Protocol.SIMPLE: 2}
# Protocol bandwidth: LL carries 4 data bytes per 8 (x0.5), LL128 120 per 128 and NCCL caps Ring LL128
# at x0.92 of Simple (tuning.cc). LL busbw caps (llMaxBws, GB/s): Hopper 1 node 141; multi-node AMD row.
_LL_FACTOR = 0.5
_LL128_FACTOR = 0.92
_LL_MAX_BUSBW_1_NODE = 141.0e9
_LL_MAX_BUSBW_2_NODES = 22.5e9
_LL_MAX_BUSBW_MORE_NODES = 19.0e9
_PER_PEER_US = 0.5  # assumed: cost of posting one peer's send/recv in a pairwise alltoall


def _ll_max_busbw(num_nodes: int) -> float:
    if num_nodes == 1:
        return _LL_MAX_BUSBW_1_NODE
    return _LL_MAX_BUSBW_2_NODES if num_nodes == 2 else _LL_MAX_BUSBW_MORE_NODES


_RECORD = ConfigDict(extra="forbid")


@pydantic_dataclass(frozen=True, slots=True, kw_only=True, config=_RECORD)
class PerOpFamily:
    """One value per op family: ``reduce`` (all-reduce, reduce), ``gather`` (all-gather,
    reduce-scatter, broadcast) and ``alltoall`` (alltoall, send/recv)."""

    reduce: float = Field(ge=0, description="All-reduce and reduce.")
    gather: float = Field(ge=0, description="All-gather, reduce-scatter and broadcast.")
    alltoall: float = Field(ge=0, description="Alltoall and send/recv.")

    def __getitem__(self, family: str) -> float:
        value: float = getattr(self, family)
        return value


@pydantic_dataclass(frozen=True, slots=True, kw_only=True, config=_RECORD)
class CommCalibration:
    """Achieved-bandwidth fractions and the message-size ramp; fitted once, never per case.

    The values live in ``calibration.toml`` beside this module, each with its source
    (:func:`calibration_entries`); :func:`collective_calibration` reads them with the user's files
    over them. Hashable, so the candidates of a calibration are remembered per (op, fabric).
    """

    nvlink_efficiency: float = Field(gt=0, le=1, description="Achieved fraction of NVLink bandwidth per direction.")
    nvls_efficiency: float = Field(
        gt=0, le=1, description="NVLS algbw as a fraction of NVLink bandwidth per direction."
    )
    network_efficiency: float = Field(gt=0, le=1, description="Achieved fraction of a node's scale-out bandwidth.")
    ramp_exponent: float = Field(gt=0, description="Exponent p of the Simple ramp 1 / (1 + (S_half / S) ** p).")
    ramp_bytes: PerOpFamily = Field(description="Ramp half size S_half at 2 nodes per op family, bytes.")
    ramp_node_exponent: PerOpFamily = Field(description="Growth of the ramp size with nodes: (nodes / 2) ** this.")
    ramp_intra_node_bytes: float = Field(ge=0, description="Ramp half size S_half inside a node, bytes.")
    nvlink_generation: PerGeneration = Field(
        description="Achieved NVLink per generation relative to nvlink_efficiency (NCCL's NVLink bandwidth per link)."
    )
    nvls_generation: PerGeneration = Field(
        description="NVLS algbw per generation relative to nvls_efficiency (NCCL's nvlsEfficiency ratios)."
    )
    nvls_ramp_loops: float = Field(
        gt=0, description="NVLS ramp half size in loops of NCCL's NVLS kernel (channels x heads x 128 KiB)."
    )


# The file, its environment variable and the user's files over it (clustersim.catalog.overlay).
CALIBRATION = CalibrationFile(CommCalibration, "clustersim.network", CALIBRATION_FILE, ENV_VAR)
# The packaged values (no user files): what the model was validated with.
DEFAULT_CALIBRATION = CALIBRATION.packaged


def collective_calibration(extra: Sequence[str | Path] = (), *, use_env: bool = True) -> CommCalibration:
    """The packaged calibration with the user's files (``CLUSTERSIM_COLLECTIVE_CALIBRATION``, then
    ``extra``) over it, field by field; the same inputs return the same (cached) object."""
    return CALIBRATION.calibration(extra, use_env=use_env)


def calibration_entries(extra: Sequence[str | Path] = (), *, use_env: bool = True) -> dict[str, CalibrationEntry]:
    """Each calibrated constant with its source, fitted note and file (see ``collective_calibration``)."""
    return CALIBRATION.entries(extra, use_env=use_env)


@dataclass(frozen=True, slots=True)
class Candidate:
    """One way to run a collective: its bandwidth bound (algbw), latency, and the links that bound it.

    ``choice_algbw_bytes_per_s`` and ``choice_ramp_bytes``: the algbw and ramp NCCL's tuner prices the
    candidate at where they differ from what it achieves (NVLS tree on a multi-node NVLink domain: NCCL
    knows neither the heads' slowdown nor the NVLS loops' ramp); NCCL chooses by them. 0 / None: the same."""

    algorithm: Algorithm
    protocol: Protocol
    algbw_bytes_per_s: float
    latency_s: float
    bound: str
    ramp_bytes: float
    choice_algbw_bytes_per_s: float = 0.0
    choice_ramp_bytes: float | None = None

    @property
    def choice_bytes_per_s(self) -> float:
        """The algbw NCCL chooses by."""
        return self.choice_algbw_bytes_per_s or self.algbw_bytes_per_s

    @property
    def choice_half_bytes(self) -> float:
        """The ramp half size NCCL chooses by."""
        return self.ramp_bytes if self.choice_ramp_bytes is None else self.choice_ramp_bytes


@dataclass(frozen=True)
class CollectiveTable:
    """Predictions for one collective over a sweep of sizes (nccl-tests columns, SI units)."""

    op: Op
    fabric: Fabric
    size_bytes: FloatArray
    time_s: FloatArray
    algbw_bytes_per_s: FloatArray
    busbw_bytes_per_s: FloatArray
    algorithm: list[Algorithm]
    protocol: list[Protocol]
    bound: list[str]
    busbw_exceeds_links: list[bool]

    @classmethod
    def from_candidates(
        cls,
        op: Op,
        fabric: Fabric,
        sizes: FloatArray,
        time_s: FloatArray,
        chosen: Sequence[Candidate],
        *,
        note: str = "",
    ) -> CollectiveTable:
        """The columns at each size from its time and the candidate that ran it (``note`` after each bound):
        the one construction, for every cost model."""
        algbw = sizes / time_s
        busbw = algbw * busbw_factor(op, fabric.num_ranks)
        link_limit = link_busbw_limit(op, fabric)
        return cls(
            op=op,
            fabric=fabric,
            size_bytes=sizes,
            time_s=time_s,
            algbw_bytes_per_s=algbw,
            busbw_bytes_per_s=busbw,
            algorithm=[c.algorithm for c in chosen],
            protocol=[c.protocol for c in chosen],
            bound=[c.bound + note for c in chosen],
            busbw_exceeds_links=[bool(b > link_limit) for b in busbw],
        )


def size_array(size_bytes: npt.ArrayLike) -> FloatArray:
    """Message sizes as a 1-d array; ``ClusterSimError`` naming ``size`` when one is negative or not finite."""
    sizes = np.atleast_1d(np.asarray(size_bytes, dtype=np.float64))
    if np.any(sizes < 0) or not np.all(np.isfinite(sizes)):
        raise ClusterSimError("sizes must be finite and non-negative", field="size")
    return sizes


def _family(op: Op) -> str:
    if op in (Op.ALL_REDUCE, Op.REDUCE):
        return "reduce"
    if op in (Op.ALLTOALL, Op.SENDRECV):
        return "alltoall"
    return "gather"


def _tree_factor(num_nodes: int) -> float:
    """Inter-node algbw of a tree relative to one node's network (NCCL Tree; SimAI calcTreeBusBw)."""
    return {2: 1.0, 3: 2.0 / 3.0}.get(num_nodes, 0.5)


def candidates(op: Op, fabric: Fabric, cal: CommCalibration | None = None) -> list[Candidate]:
    """Every (algorithm, protocol) NCCL could use for ``op`` on ``fabric`` (default calibration:
    ``default_calibration()``)."""
    cal = default_calibration() if cal is None else cal
    g, nodes, n = fabric.devices_per_node, fabric.num_nodes, fabric.num_ranks
    generation = cal.nvlink_generation.factor(fabric.family)  # NCCL's NVLink per link: 20.6 of 25, 40 of 50 GB/s
    nvlink = fabric.scaleup_bytes_per_s * cal.nvlink_efficiency * generation
    nvls = fabric.scaleup_bytes_per_s * cal.nvls_efficiency * generation * cal.nvls_generation.factor(fabric.family)
    network = fabric.network_bytes_per_s * cal.network_efficiency
    multi = nodes > 1
    adapter_us = fabric.network_latency_s / _US
    simple_adapter_us = adapter_us * (2 if fabric.network_flush else 1)

    def net_hop(algorithm: Algorithm, proto: int) -> float:
        """One network hop: NCCL's hardware latency plus the adapter's (a Simple hop that flushes: twice)."""
        return _NET_US[algorithm][proto] + (simple_adapter_us if proto == 2 else adapter_us)

    family = _family(op)
    ramp = cal.ramp_intra_node_bytes
    if multi:
        ramp = cal.ramp_bytes[family] * (nodes / 2) ** cal.ramp_node_exponent[family]
    factor = busbw_factor(op, n)
    out: list[tuple[Algorithm, float, str, float]] = []  # algorithm, algbw, bound, simple latency us

    def ring_latency(proto: int) -> float:
        steps = 2 * (n - 1) if op is Op.ALL_REDUCE else max(n - 1, 1)
        inter = (2 if op is Op.ALL_REDUCE else 1) * (nodes - 1)
        intra_lat = _NVLINK_US[Algorithm.RING][proto]
        if multi:
            intra_lat = max(intra_lat, _NET_OVERHEAD_US * (3 if proto == 2 else 1))
        base = _BASE_US[Algorithm.RING][proto]
        return base + (steps - inter) * intra_lat + inter * net_hop(Algorithm.RING, proto)

    def tree_latency(proto: int) -> float:
        hops = 2 * ((g - 1) * _NVLINK_US[Algorithm.TREE][proto] + math.log2(nodes) * net_hop(Algorithm.TREE, proto))
        return _BASE_US[Algorithm.TREE][proto] + hops

    if op is Op.ALLTOALL:
        intra_time = (g - 1) / n / nvlink if g > 1 else 0.0
        inter_time = (nodes - 1) * g * g / n / network if multi else 0.0
        bound = "network (off-node share per device)" if inter_time >= intra_time else "NVLink"
        latency = net_hop(Algorithm.RING, 2) if multi else _NVLINK_US[Algorithm.RING][2]
        out.append((Algorithm.PAIRWISE, 1.0 / max(intra_time, inter_time), bound, latency + (n - 1) * _PER_PEER_US))
    elif op is Op.SENDRECV:
        algbw, bound = (network / g, "network share of one device") if multi else (nvlink, "NVLink")
        hop = net_hop(Algorithm.RING, 2) if multi else _NVLINK_US[Algorithm.RING][2]
        out.append((Algorithm.DIRECT, algbw, bound, _BASE_US[Algorithm.RING][2] + hop))
    else:
        ring_busbw, ring_bound = (network, "network") if multi and network < nvlink else (nvlink, "NVLink")
        out.append((Algorithm.RING, ring_busbw / factor, ring_bound, ring_latency(2)))
        if op is Op.ALL_REDUCE:
            if multi:
                tree = min(nvlink / 2, _tree_factor(nodes) * network)
                out.append((Algorithm.TREE, tree, "network (tree)", tree_latency(2)))
                hier_time = 2 * (g - 1) / g / nvlink + 2 * (nodes - 1) / nodes / network
                out.append((Algorithm.HIERARCHICAL, 1.0 / hier_time, "NVLink then network", ring_latency(2)))
            else:
                out.append((Algorithm.TREE, nvlink / 2, "NVLink (chain)", tree_latency(2)))

    result: list[Candidate] = []
    if op is Op.ALL_REDUCE and fabric.in_network_reduction and (multi or g > 2):
        result.append(_nvls_candidate(fabric, cal, nvls, network, ramp, simple_adapter_us))
    low_latency = not multi or fabric.network_ll_protocols
    for algorithm, algbw, bound, latency_us in out:
        result.append(Candidate(algorithm, Protocol.SIMPLE, algbw, latency_us * _US, bound, ramp))
        if low_latency and algorithm in (Algorithm.RING, Algorithm.TREE, Algorithm.DIRECT, Algorithm.PAIRWISE):
            proto_latency = {
                Algorithm.RING: ring_latency,
                Algorithm.TREE: tree_latency,
            }.get(algorithm)
            # Pairwise and direct sends have no NCCL LL latency table: assume half the Simple latency.
            ll_latency = proto_latency(0) if proto_latency else latency_us * 0.5
            ll_algbw = min(algbw * _LL_FACTOR, _ll_max_busbw(nodes) / factor)
            result.append(Candidate(algorithm, Protocol.LL, ll_algbw, ll_latency * _US, bound, 0.0))
            if not multi:  # NCCL enables LL128 on Hopper only over NVLink / PCIe paths
                ll128_latency = proto_latency(1) if proto_latency else latency_us
                result.append(
                    Candidate(algorithm, Protocol.LL128, algbw * _LL128_FACTOR, ll128_latency * _US, bound, ramp)
                )
    return result


def _nvls_candidate(
    fabric: Fabric, cal: CommCalibration, nvls: float, network: float, ramp: float, simple_adapter_us: float
) -> Candidate:
    """NVLS inside one NVLink domain, or NVLS tree across domains (``clustersim.network.nvls``): NVLS's
    algbw ``nvls``, the heads' share of the domain's achieved ``network``, and the ramp of NCCL's NVLS
    loops (at least the multi-node ``ramp`` across domains)."""
    g, nodes = fabric.devices_per_node, fabric.num_nodes
    loops = nvls_ramp_bytes(fabric.family, g, cal.nvls_ramp_loops, nodes)
    if nodes == 1:
        return Candidate(Algorithm.NVLS, Protocol.SIMPLE, nvls, _NVLS_NVLINK_US * _US, "NVLink SHARP", loops)
    heads_network = network * nvls_heads(g) / g  # each head sends over its own GPU's share of the NICs
    mnnvl = fabric.servers_per_node > 1
    tree = nvls_tree(nvls, heads_network, _tree_factor(nodes), mnnvl=mnnvl)
    latency_us = _NVLS_NVLINK_US + 2 * math.log2(nodes) * (_NVLSTREE_NET_US + simple_adapter_us)
    return Candidate(
        Algorithm.NVLSTREE,
        Protocol.SIMPLE,
        tree.algbw_bytes_per_s,
        latency_us * _US,
        tree.bound,
        max(ramp, loops),
        tree.choice_algbw_bytes_per_s,
        ramp if mnnvl else None,  # NCCL prices NVLS tree like any other pipeline: the multi-node ramp
    )


def candidate_time_s(candidate: Candidate, size_bytes: FloatArray, cal: CommCalibration | None = None) -> FloatArray:
    """Time of ``candidate`` for each size: latency + size / (algbw x size efficiency)."""
    cal = default_calibration() if cal is None else cal
    return _time_s(candidate, size_bytes, cal)


def _time_s(candidate: Candidate, size_bytes: FloatArray, cal: CommCalibration, *, choice: bool = False) -> FloatArray:
    """Achieved time of ``candidate`` at each size, or (``choice``) the time NCCL's tuner prices it at."""
    algbw = candidate.choice_bytes_per_s if choice else candidate.algbw_bytes_per_s
    half = candidate.choice_half_bytes if choice else candidate.ramp_bytes
    sizes = np.maximum(size_bytes, 1.0)
    transfer = sizes / algbw
    if half > 0:
        transfer = transfer * (1.0 + (half / sizes) ** cal.ramp_exponent)
    return candidate.latency_s + transfer


def predict_collective(
    op: Op,
    size_bytes: npt.ArrayLike,
    fabric: Fabric,
    *,
    algorithm: Algorithm | None = None,
    protocol: Protocol | None = None,
    cal: CommCalibration | None = None,
) -> CollectiveTable:
    """Predict ``op`` at each size on ``fabric``: the fastest candidate, or the forced algorithm/protocol
    (default calibration: ``default_calibration()``)."""
    cal = default_calibration() if cal is None else cal
    sizes = size_array(size_bytes)
    options = [
        c
        for c in candidates(op, fabric, cal)
        if (algorithm is None or c.algorithm is algorithm) and (protocol is None or c.protocol is protocol)
    ]
    if not options:
        nccl = fabric.scaleup_link == "NVLink"  # NCCL's protocol names only where NCCL runs (not on NeuronLink)
        valid = sorted(
            {
                f"{c.algorithm.value}/{c.protocol.value}" if nccl else c.algorithm.value
                for c in candidates(op, fabric, cal)
            }
        )
        forced = "/".join(x.value for x in (algorithm, protocol) if x is not None)
        raise ClusterSimError(
            f"{op.value} on {fabric.name} cannot use {forced}; valid: {', '.join(valid)}",
            field="algorithm" if algorithm is not None else "protocol",
            value=forced,
        )
    times = np.stack([candidate_time_s(c, sizes, cal) for c in options])
    # NCCL picks by its tuner's price, which differs from what is achieved only for NVLS tree on NVL72.
    choice = np.stack([_time_s(c, sizes, cal, choice=True) for c in options])
    best = np.argmin(choice, axis=0)
    return CollectiveTable.from_candidates(
        op, fabric, sizes, times[best, np.arange(sizes.size)], [options[i] for i in best]
    )


def link_busbw_limit(op: Op, fabric: Fabric) -> float:
    """The busbw a ring could reach on the raw links: NVLink per device, or the node's network."""
    if fabric.num_nodes == 1:
        return fabric.scaleup_bytes_per_s
    if op is Op.ALLTOALL:
        off_node = (fabric.num_nodes - 1) * fabric.devices_per_node / (fabric.num_ranks - 1)
        return fabric.network_bytes_per_s / fabric.devices_per_node / off_node
    if op is Op.SENDRECV:
        return fabric.network_bytes_per_s / fabric.devices_per_node
    return min(fabric.scaleup_bytes_per_s, fabric.network_bytes_per_s)


def _candidate_arrays(options: tuple[Candidate, ...] | list[Candidate]) -> Arrays:
    """Latency, algbw, ramp size (0 without a ramp), and the algbw and ramp size NCCL chooses by of each
    candidate, as columns (the last two are the algbw and ramp arrays themselves where they agree)."""
    latency = np.array([[c.latency_s] for c in options])
    algbw = np.array([[c.algbw_bytes_per_s] for c in options])
    half = np.array([[c.ramp_bytes] for c in options])
    choice = np.array([[c.choice_bytes_per_s] for c in options])
    choice_half = np.array([[c.choice_half_bytes] for c in options])
    if np.array_equal(choice, algbw) and np.array_equal(choice_half, half):
        return latency, algbw, half, algbw, half
    return latency, algbw, half, choice, choice_half


def default_calibration() -> CommCalibration:
    """What the model uses when no calibration is given: the packaged values, with the files in
    ``CLUSTERSIM_COLLECTIVE_CALIBRATION`` over them when it is set (checked on every call: cheap)."""
    return CALIBRATION.default()


@functools.lru_cache(maxsize=4096)
def default_candidate_arrays(op: Op, fabric: Fabric) -> Arrays:
    """``_candidate_arrays`` of the packaged calibration, remembered per (op, fabric): a planner asks
    for the same few groups of the same system over and over."""
    return _candidate_arrays(candidates(op, fabric, DEFAULT_CALIBRATION))


@functools.lru_cache(maxsize=1024)
def candidate_arrays(op: Op, fabric: Fabric, cal: CommCalibration) -> Arrays:
    """``_candidate_arrays`` of any other calibration, remembered per (op, fabric, calibration)."""
    return _candidate_arrays(candidates(op, fabric, cal))


def collective_time_s(
    op: Op, size_bytes: npt.ArrayLike, fabric: Fabric, cal: CommCalibration | None = None
) -> FloatArray:
    """Only the time of the candidate ``predict_collective`` picks at each size (the fastest by NCCL's
    price), in one array expression over candidates x sizes (``candidate_time_s`` for all at once)."""
    cal = default_calibration() if cal is None else cal
    if cal is DEFAULT_CALIBRATION:
        latency, algbw, half, choice, choice_half = default_candidate_arrays(op, fabric)
    else:
        latency, algbw, half, choice, choice_half = candidate_arrays(op, fabric, cal)
    sizes = np.asarray(size_bytes, dtype=np.float64)
    if sizes.size == 1:  # one size (a single estimate): the candidates as one column, fewer array calls
        size = max(float(sizes.flat[0]), 1.0)
        column = latency[:, 0] + size / algbw[:, 0] * (1.0 + (half[:, 0] / size) ** cal.ramp_exponent)
        if choice is algbw:
            return np.array([column.min()])
        priced = latency[:, 0] + size / choice[:, 0] * (1.0 + (choice_half[:, 0] / size) ** cal.ramp_exponent)
        return np.array([column[np.argmin(priced)]])
    sizes = np.maximum(np.atleast_1d(sizes), 1.0)
    times = ramp_time_s(latency, algbw, half, sizes, cal.ramp_exponent)
    if choice is algbw:
        return np.asarray(times.min(axis=0), dtype=np.float64)
    picked = np.argmin(ramp_time_s(latency, choice, choice_half, sizes, cal.ramp_exponent), axis=0)
    return np.asarray(times[picked, np.arange(sizes.size)], dtype=np.float64)


def ramp_time_s(
    latency: FloatArray, algbw: FloatArray, half: FloatArray, sizes: FloatArray, exponent: float
) -> FloatArray:
    """Latency plus the size at the algbw, slowed by the Simple ramp ``1 + (S_half / S) ** p`` (the candidates'
    columns against the sizes, broadcast)."""
    return np.asarray(latency + sizes / algbw * (1.0 + (half / sizes) ** exponent), dtype=np.float64)
