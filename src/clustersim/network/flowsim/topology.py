"""A fat-tree fabric as arrays: hosts with GPUs and NICs (rails), leaf, spine and core switches.

Every directed link is one index into flat arrays (capacity, tier, failed); no Python object per
link, so a 20,000-GPU UltraCluster builds in well under a second. The layout of the index space:

* NIC links: ``nic_up`` (NIC -> leaf) and ``nic_down`` (leaf -> NIC), one per NIC port
  ``p = host * nics_per_host + rail``;
* leaf links: ``leaf_up`` (leaf -> pod spine ``j``) and ``leaf_down`` (spine ``j`` -> leaf), one per
  (leaf, spine of its pod);
* core links: ``spine_up`` (pod spine ``j`` -> core ``(j, m)``) and ``core_down`` back, one per (pod,
  spine, core of plane ``j``); absent when the whole fabric fits in one pod (two tiers).

Solver resources extend the links with *bundles* (the parallel links that packet spraying loads
evenly: all uplinks of one leaf, all downlinks into one leaf, all core uplinks of one pod, all core
downlinks into one pod) and with each GPU's scale-up (NVLink) egress and ingress.

Sizing (a stated assumption: AWS publishes no switch-level UltraCluster design): switches of
``radix`` ports; a leaf has ``radix / 2`` host-facing ports and ``radix / 2 / oversubscription``
uplinks, one to each spine of its pod; a pod is ``radix / 2`` leaves; a spine has ``radix / 2 /
core_oversubscription`` uplinks, one to each core of its plane. Core switches take one link per
pod (their radix is not enforced). Rail-optimized: NIC ``k`` of every host sits on a leaf of rail
group ``k`` (rails start on fresh leaves).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from clustersim.errors import ClusterSimError

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


class Tier(IntEnum):
    """Which layer a resource belongs to (directed)."""

    NIC_UP = 0
    NIC_DOWN = 1
    LEAF_UP = 2
    LEAF_DOWN = 3
    SPINE_UP = 4
    CORE_DOWN = 5
    SCALEUP_OUT = 6
    SCALEUP_IN = 7


TIER_NAMES = {
    Tier.NIC_UP: "nic->leaf",
    Tier.NIC_DOWN: "leaf->nic",
    Tier.LEAF_UP: "leaf->spine",
    Tier.LEAF_DOWN: "spine->leaf",
    Tier.SPINE_UP: "spine->core",
    Tier.CORE_DOWN: "core->spine",
    Tier.SCALEUP_OUT: "gpu->nvlink",
    Tier.SCALEUP_IN: "nvlink->gpu",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class FatTreeSpec:
    """What a fat-tree is made of; ``build`` turns it into a ``FatTree``."""

    num_hosts: int
    gpus_per_host: int
    nics_per_host: int
    nic_bytes_per_s: float
    scaleup_bytes_per_s: float
    radix: int = 64
    oversubscription: float = 1.0
    core_oversubscription: float = 1.0
    rail_optimized: bool = True
    link_latency_s: float = 0.0
    name: str = "fat-tree"
    scaleup_link: str = "NVLink"  # the scale-up fabric's name, for labels only (the catalog's link type)
    # NCCL's structure on calibrated links (``nccl``): the accelerator family, the adapter's per-message
    # latency (NCCL's latencyInter) and whether a network receive is flushed
    family: str = ""
    adapter_latency_s: float = 0.0
    network_flush: bool = False

    def __post_init__(self) -> None:
        for field, value in (
            ("num_hosts", self.num_hosts),
            ("gpus_per_host", self.gpus_per_host),
            ("nics_per_host", self.nics_per_host),
        ):
            if value < 1:
                raise ClusterSimError(f"{field} must be at least 1, got {value}", field=field, value=value)
        if self.radix < 2 or self.radix % 2:
            raise ClusterSimError(
                f"radix must be an even number >= 2, got {self.radix}", field="radix", value=self.radix
            )
        for field, ratio in (
            ("oversubscription", self.oversubscription),
            ("core_oversubscription", self.core_oversubscription),
        ):
            if not (1.0 <= ratio <= self.radix / 2):
                raise ClusterSimError(
                    f"{field} must be between 1 and {self.radix // 2} (radix / 2), got {ratio!r}",
                    field=field,
                    value=ratio,
                )
        if not (self.nic_bytes_per_s > 0 and self.scaleup_bytes_per_s > 0):
            raise ClusterSimError("NIC and scale-up bandwidths must be positive", field="bandwidth")
        if not self.link_latency_s >= 0:
            raise ClusterSimError(
                f"link latency must be at least 0 s, got {self.link_latency_s!r}", field="link_latency_s"
            )


@dataclass(frozen=True, slots=True, eq=False)
class FatTree:
    """A built fat-tree: index arithmetic plus per-resource arrays (see the module docstring)."""

    spec: FatTreeSpec
    hosts_per_leaf: int  # NIC ports per leaf
    leaf_uplinks: int  # spines per pod
    leaves_per_pod: int
    spine_uplinks: int  # cores per plane; 0 with two tiers
    num_leaves: int
    num_pods: int
    nic_leaf: IntArray  # leaf of each NIC port
    # Resources: links, then bundles, then scale-up ports.
    capacity_bytes_per_s: FloatArray
    tier: npt.NDArray[np.int8]
    failed: BoolArray
    bundle_of: IntArray  # each link's bundle resource, -1 for none (NIC links)

    # ---- index arithmetic -------------------------------------------------------------------
    @property
    def num_nics(self) -> int:
        return self.spec.num_hosts * self.spec.nics_per_host

    @property
    def num_tiers(self) -> int:
        """Switch tiers: 1 (one leaf), 2 (leaf + spine) or 3 (with core)."""
        if self.num_leaves == 1:
            return 1
        return 2 if self.num_pods == 1 else 3

    @property
    def num_leaf_links(self) -> int:
        return self.num_leaves * self.leaf_uplinks

    @property
    def num_core_links(self) -> int:
        return self.num_pods * self.leaf_uplinks * self.spine_uplinks

    @property
    def nic_up0(self) -> int:
        return 0

    @property
    def nic_down0(self) -> int:
        return self.num_nics

    @property
    def leaf_up0(self) -> int:
        return 2 * self.num_nics

    @property
    def leaf_down0(self) -> int:
        return self.leaf_up0 + self.num_leaf_links

    @property
    def spine_up0(self) -> int:
        return self.leaf_down0 + self.num_leaf_links

    @property
    def core_down0(self) -> int:
        return self.spine_up0 + self.num_core_links

    @property
    def num_links(self) -> int:
        return self.core_down0 + self.num_core_links

    @property
    def bundle0(self) -> int:
        """First bundle: leaf-up per leaf, leaf-down per leaf, pod-up per pod, pod-down per pod."""
        return self.num_links

    @property
    def scaleup0(self) -> int:
        return self.bundle0 + 2 * self.num_leaves + 2 * self.num_pods

    @property
    def num_resources(self) -> int:
        return int(self.capacity_bytes_per_s.size)

    def leaf_up_bundle(self, leaf: IntArray) -> IntArray:
        return self.bundle0 + leaf

    def leaf_down_bundle(self, leaf: IntArray) -> IntArray:
        return self.bundle0 + self.num_leaves + leaf

    def pod_up_bundle(self, pod: IntArray) -> IntArray:
        return self.bundle0 + 2 * self.num_leaves + pod

    def pod_down_bundle(self, pod: IntArray) -> IntArray:
        return self.bundle0 + 2 * self.num_leaves + self.num_pods + pod

    def scaleup_out(self, gpu: IntArray) -> IntArray:
        """Egress port of global GPU ``host * gpus_per_host + g``."""
        return self.scaleup0 + gpu

    def scaleup_in(self, gpu: IntArray) -> IntArray:
        return self.scaleup0 + self.spec.num_hosts * self.spec.gpus_per_host + gpu

    def nic_rails(self, gpu_in_host: IntArray) -> IntArray:
        """The rails (NIC indices in a host) each GPU uses, shape ``(len, rails_per_gpu)``."""
        g, r = self.spec.gpus_per_host, self.spec.nics_per_host
        per = max(1, r // g)
        first = (np.asarray(gpu_in_host, dtype=np.int64) * r) // g
        return first[:, None] + np.arange(per, dtype=np.int64)[None, :]

    def with_failures(self, links: IntArray) -> FatTree:
        """A copy with ``links`` (link indices) failed: zero capacity, bundles shrunk."""
        links = np.asarray(links, dtype=np.int64)
        if links.size and (links.min() < 0 or links.max() >= self.num_links):
            raise ClusterSimError(f"failed link index out of range 0..{self.num_links - 1}", field="fail_links")
        failed = self.failed.copy()
        failed[links] = True
        return _assemble(self.spec, self._shape(), failed)

    def _shape(self) -> tuple[int, int, int, int, int, int]:
        return (
            self.hosts_per_leaf,
            self.leaf_uplinks,
            self.leaves_per_pod,
            self.spine_uplinks,
            self.num_leaves,
            self.num_pods,
        )

    def link_name(self, index: int) -> str:
        """A readable name of link ``index`` (``leaf 3 -> spine 1/7``)."""
        r = self.spec.nics_per_host
        i = int(index)
        if i < self.nic_down0:
            return f"host {i // r} nic {i % r} -> leaf {int(self.nic_leaf[i])}"
        if i < self.leaf_up0:
            p = i - self.nic_down0
            return f"leaf {int(self.nic_leaf[p])} -> host {p // r} nic {p % r}"
        u, c = self.leaf_uplinks, max(self.spine_uplinks, 1)
        if i < self.leaf_down0:
            leaf, j = divmod(i - self.leaf_up0, u)
            return f"leaf {leaf} -> spine {leaf // self.leaves_per_pod}/{j}"
        if i < self.spine_up0:
            leaf, j = divmod(i - self.leaf_down0, u)
            return f"spine {leaf // self.leaves_per_pod}/{j} -> leaf {leaf}"
        if i < self.core_down0:
            pj, m = divmod(i - self.spine_up0, c)
            pod, j = divmod(pj, u)
            return f"spine {pod}/{j} -> core {j}/{m}"
        if i < self.num_links:
            pj, m = divmod(i - self.core_down0, c)
            pod, j = divmod(pj, u)
            return f"core {j}/{m} -> spine {pod}/{j}"
        return f"resource {i}"


def build(spec: FatTreeSpec) -> FatTree:
    """The fat-tree of ``spec``: leaves of ``radix / 2`` NIC ports, pods of ``radix / 2`` leaves."""
    half = spec.radix // 2
    hosts_per_leaf = half
    leaf_uplinks = max(1, round(half / spec.oversubscription))
    leaves_per_pod = half
    num_nics = spec.num_hosts * spec.nics_per_host
    if spec.rail_optimized:
        leaves_per_rail = math.ceil(spec.num_hosts / hosts_per_leaf)
        num_leaves = leaves_per_rail * spec.nics_per_host
    else:
        num_leaves = math.ceil(num_nics / hosts_per_leaf)
    num_pods = math.ceil(num_leaves / leaves_per_pod)
    spine_uplinks = max(1, round(leaves_per_pod / spec.core_oversubscription)) if num_pods > 1 else 0
    shape = (hosts_per_leaf, leaf_uplinks, leaves_per_pod, spine_uplinks, num_leaves, num_pods)
    failed = np.zeros(2 * num_nics + 2 * num_leaves * leaf_uplinks + 2 * num_pods * leaf_uplinks * spine_uplinks, bool)
    return _assemble(spec, shape, failed)


def _assemble(spec: FatTreeSpec, shape: tuple[int, int, int, int, int, int], failed: BoolArray) -> FatTree:
    hosts_per_leaf, u, leaves_per_pod, c, num_leaves, num_pods = shape
    h, r, g = spec.num_hosts, spec.nics_per_host, spec.gpus_per_host
    num_nics = h * r
    port = np.arange(num_nics, dtype=np.int64)
    host, rail = port // r, port % r
    if spec.rail_optimized:
        leaves_per_rail = num_leaves // r
        nic_leaf = rail * leaves_per_rail + host // hosts_per_leaf
    else:
        nic_leaf = port // hosts_per_leaf
    num_leaf_links = num_leaves * u
    num_core_links = num_pods * u * c
    num_links = 2 * num_nics + 2 * num_leaf_links + 2 * num_core_links
    tiers = np.concatenate(
        [
            np.full(num_nics, Tier.NIC_UP),
            np.full(num_nics, Tier.NIC_DOWN),
            np.full(num_leaf_links, Tier.LEAF_UP),
            np.full(num_leaf_links, Tier.LEAF_DOWN),
            np.full(num_core_links, Tier.SPINE_UP),
            np.full(num_core_links, Tier.CORE_DOWN),
        ]
    ).astype(np.int8)
    nic_cap = spec.nic_bytes_per_s
    link_cap = np.where(failed, 0.0, nic_cap)
    leaf_link = np.arange(num_leaf_links, dtype=np.int64)
    core_link = np.arange(num_core_links, dtype=np.int64)
    bundle0 = num_links
    bundle_of = np.concatenate(
        [
            np.full(2 * num_nics, -1, dtype=np.int64),
            bundle0 + leaf_link // u,
            bundle0 + num_leaves + leaf_link // u,
            bundle0 + 2 * num_leaves + core_link // max(u * c, 1),
            bundle0 + 2 * num_leaves + num_pods + core_link // max(u * c, 1),
        ]
    )
    num_bundles = 2 * num_leaves + 2 * num_pods
    bundle_cap = np.zeros(num_bundles)
    members = bundle_of >= 0
    np.add.at(bundle_cap, bundle_of[members] - bundle0, link_cap[members])
    num_gpus = h * g
    capacity = np.concatenate([link_cap, bundle_cap, np.full(2 * num_gpus, spec.scaleup_bytes_per_s)])
    bundle_tiers = np.repeat(
        np.array([Tier.LEAF_UP, Tier.LEAF_DOWN, Tier.SPINE_UP, Tier.CORE_DOWN], dtype=np.int8),
        [num_leaves, num_leaves, num_pods, num_pods],
    )
    tier = np.concatenate(
        [tiers, bundle_tiers, np.full(num_gpus, Tier.SCALEUP_OUT, np.int8), np.full(num_gpus, Tier.SCALEUP_IN, np.int8)]
    )
    return FatTree(
        spec=spec,
        hosts_per_leaf=hosts_per_leaf,
        leaf_uplinks=u,
        leaves_per_pod=leaves_per_pod,
        spine_uplinks=c,
        num_leaves=num_leaves,
        num_pods=num_pods,
        nic_leaf=nic_leaf,
        capacity_bytes_per_s=capacity,
        tier=tier,
        failed=failed,
        bundle_of=bundle_of,
    )
