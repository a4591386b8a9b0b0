"""A catalogued cluster as a fat-tree, jobs placed on it (one, or several side by side), and links or
spine switches failed on it.

``fat_tree_for_instance`` reads the instance through the network layer's topology
(``topology_for_instance``: GPUs per host, rails and their speed, scale-up bandwidth, the adapter's
latency, the cluster template's oversubscription) and sizes the fabric to the template's largest
published cluster of that instance (20,000 GPUs for p5), or to the job when no template lists it.
"""

from __future__ import annotations

import math
from enum import StrEnum

import numpy as np

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError, UnknownNameError
from clustersim.network.flowsim.topology import FatTree, FatTreeSpec, IntArray, build
from clustersim.network.topology import Topology, check_cluster_size, cluster_limit, topology_for_instance

MAX_FABRIC_HOSTS = 50_000


class Placement(StrEnum):
    """Where a job's hosts sit on the fabric."""

    PACKED = "packed"  # consecutive hosts: as few leaves and pods as possible
    SPREAD = "spread"  # evenly spaced over the whole fabric: across leaves and pods
    RANDOM = "random"  # a seeded random choice, ranks in that (random) order: no topology-aware ordering


def parse_placement(name: str) -> Placement:
    try:
        return Placement(name.strip().lower())
    except ValueError:
        raise UnknownNameError("placement", name, [p.value for p in Placement]) from None


def cluster_hosts(catalog: Catalog, instance: str, num_nodes: int) -> int:
    """Hosts of the catalogued cluster of ``instance`` (its templates' largest published size); a job of
    more ``num_nodes`` than it holds is refused (``topology.check_cluster_size``), not given a larger one."""
    check_cluster_size(catalog, instance, num_nodes)
    limit = cluster_limit(catalog, instance)
    if limit is None:
        return num_nodes
    per_host = int(catalog.instance(instance).num_accelerators.value)
    return max(num_nodes, math.ceil(limit.max_accelerators / per_host))


def fat_tree_for_instance(
    catalog: Catalog,
    instance: str,
    num_nodes: int,
    *,
    fabric_hosts: int | None = None,
    radix: int = 64,
    oversubscription: float | None = None,
    rail_optimized: bool = True,
    link_latency_s: float = 0.0,
    topology: Topology | None = None,
) -> FatTree:
    """The fat-tree a job of ``num_nodes`` instances runs in (``fabric_hosts``: default the cluster's).

    ``topology``: the job's own view of the instance (a ``System``'s, whose devices may split the
    chips' cores: a host then holds that many devices, each with its share of the scale-up fabric);
    default the instance's, one device per accelerator.

    ``link_latency_s`` (default 0) is paid by every dependent flow on each network link it crosses.
    A flow-level ring moves each step's chunk as one flow, so latency per link would be paid once per
    step, where NCCL pipelines slices and pays it about once per network hop of the ring; the
    per-message latency is therefore left to the analytic model (``cost`` adds it) unless given."""
    topo = topology or topology_for_instance(catalog, instance, max(num_nodes, 1))
    hosts = cluster_hosts(catalog, instance, num_nodes) if fabric_hosts is None else fabric_hosts
    if hosts < num_nodes:
        raise ClusterSimError(
            f"a fabric of {hosts} hosts cannot hold {num_nodes} nodes", field="nodes", value=num_nodes
        )
    if hosts > MAX_FABRIC_HOSTS:
        raise ClusterSimError(f"fabric hosts must be at most {MAX_FABRIC_HOSTS}, got {hosts}", field="fabric_hosts")
    if topo.rails is None:
        raise ClusterSimError(f"instance {instance} lists no network cards", field="instance", value=instance)
    ratio = oversubscription if oversubscription is not None else (topo.tiers.oversubscription if topo.tiers else 1.0)
    spec = FatTreeSpec(
        num_hosts=hosts,
        gpus_per_host=topo.devices_per_node,
        nics_per_host=topo.rails.num_nics,
        nic_bytes_per_s=topo.rails.nic_bits_per_s / 8,
        scaleup_bytes_per_s=topo.scaleup_bytes_per_s,
        radix=radix,
        oversubscription=ratio,
        rail_optimized=rail_optimized,
        link_latency_s=link_latency_s,
        name=f"{hosts} x {instance}",
        scaleup_link=topo.scaleup_link,
        family=topo.family,
        adapter_latency_s=topo.network_latency_s,
        network_flush=topo.network_flush,
    )
    return build(spec)


def place(tree: FatTree, num_nodes: int, placement: Placement = Placement.PACKED, seed: int = 0) -> IntArray:
    """The hosts of a job of ``num_nodes`` nodes, in rank order. Packed and spread hosts are in
    fabric order, so a ring leaves each leaf once; random ones come in a random order, as from a
    scheduler that does not order ranks by topology."""
    total = tree.spec.num_hosts
    if not 1 <= num_nodes <= total:
        raise ClusterSimError(f"nodes must be between 1 and {total} (the fabric), got {num_nodes}", field="nodes")
    if placement is Placement.PACKED:
        return np.arange(num_nodes, dtype=np.int64)
    if placement is Placement.SPREAD:
        return (np.arange(num_nodes, dtype=np.int64) * total) // num_nodes
    rng = np.random.default_rng(seed)
    return rng.choice(total, size=num_nodes, replace=False).astype(np.int64)


def job_uplinks(tree: FatTree, hosts: IntArray) -> IntArray:
    """The leaf-to-spine link indices (up direction) of the leaves the job's NICs sit on."""
    nics = (hosts[:, None] * tree.spec.nics_per_host + np.arange(tree.spec.nics_per_host)).reshape(-1)
    leaves = np.unique(tree.nic_leaf[nics])
    u = tree.leaf_uplinks
    return (tree.leaf_up0 + leaves[:, None] * u + np.arange(u)).reshape(-1)


def fail_job_links(tree: FatTree, hosts: IntArray, count: int, seed: int = 0) -> FatTree:
    """``tree`` with ``count`` leaf-spine cables (both directions) of the job's leaves failed, chosen
    with ``seed``."""
    if count < 0:
        raise ClusterSimError(f"failed links must be at least 0, got {count}", field="fail_links", value=count)
    if count == 0:
        return tree
    ups = job_uplinks(tree, hosts)
    if tree.num_tiers < 2 or count > ups.size:
        raise ClusterSimError(
            f"the job's leaves have {ups.size if tree.num_tiers >= 2 else 0} spine links; cannot fail {count}",
            field="fail_links",
            value=count,
        )
    chosen = np.sort(np.random.default_rng(seed).choice(ups, size=count, replace=False))
    return tree.with_failures(np.concatenate([chosen, chosen + tree.num_leaf_links]))


def place_jobs(
    tree: FatTree, num_nodes: int, num_jobs: int, placement: Placement = Placement.PACKED, seed: int = 0
) -> list[IntArray]:
    """The hosts of ``num_jobs`` jobs of ``num_nodes`` nodes each, side by side, each in rank order.

    Packed: consecutive blocks, job after job. Spread: every job spread over the whole fabric, the jobs
    interleaved (job ``k`` takes every ``num_jobs``-th of the evenly spaced hosts, from the ``k``-th).
    Random: a seeded random choice of all the jobs' hosts, dealt out in random order (interleaved)."""
    if num_jobs < 1:
        raise ClusterSimError(f"jobs must be at least 1, got {num_jobs}", field="jobs", value=num_jobs)
    total = tree.spec.num_hosts
    if num_nodes * num_jobs > total:
        raise ClusterSimError(
            f"{num_jobs} jobs of {num_nodes} nodes need {num_nodes * num_jobs} hosts; the fabric has {total}",
            field="jobs",
            value=num_jobs,
        )
    hosts = place(tree, num_nodes * num_jobs, placement, seed)
    if placement is Placement.SPREAD:
        return [hosts[k::num_jobs] for k in range(num_jobs)]
    return [hosts[k * num_nodes : (k + 1) * num_nodes] for k in range(num_jobs)]


def spine_links(tree: FatTree, pod: int, spine: int) -> IntArray:
    """Every directed link of spine ``spine`` of pod ``pod``: to and from the pod's leaves, to and from
    its cores."""
    u, c = tree.leaf_uplinks, tree.spine_uplinks
    leaves = np.arange(pod * tree.leaves_per_pod, min((pod + 1) * tree.leaves_per_pod, tree.num_leaves))
    leaf = np.concatenate([tree.leaf_up0 + leaves * u + spine, tree.leaf_down0 + leaves * u + spine])
    cores = (pod * u + spine) * c + np.arange(c, dtype=np.int64)
    return np.concatenate([leaf, tree.spine_up0 + cores, tree.core_down0 + cores]).astype(np.int64)


def fail_job_switches(tree: FatTree, hosts: IntArray, count: int, seed: int = 0) -> FatTree:
    """``tree`` with ``count`` spine switches of the job's pods down (every link of each failed), chosen
    with ``seed``; every pod keeps at least one spine, or its leaves would be cut off."""
    if count < 0:
        raise ClusterSimError(f"failed switches must be at least 0, got {count}", field="fail_switches", value=count)
    if count == 0:
        return tree
    nics = (hosts[:, None] * tree.spec.nics_per_host + np.arange(tree.spec.nics_per_host)).reshape(-1)
    pods = np.unique(tree.nic_leaf[nics] // tree.leaves_per_pod)
    u = tree.leaf_uplinks
    spare = pods.size * (u - 1) if tree.num_tiers >= 2 else 0
    if count > spare:
        raise ClusterSimError(
            f"the job's {pods.size} pod(s) have {pods.size * u if tree.num_tiers >= 2 else 0} spines and must keep "
            f"one each; cannot fail {count} (at most {spare})",
            field="fail_switches",
            value=count,
        )
    rng = np.random.default_rng(seed)
    # One spine per pod kept (a seeded one), the failed ones drawn from the rest: pod * u + spine.
    order = rng.permuted(np.broadcast_to(np.arange(u), (pods.size, u)), axis=1)
    candidates = (pods[:, None] * u + order[:, 1:]).reshape(-1)
    chosen = np.sort(rng.choice(candidates, size=count, replace=False))
    links = np.concatenate([spine_links(tree, int(s // u), int(s % u)) for s in chosen])
    return tree.with_failures(links)
