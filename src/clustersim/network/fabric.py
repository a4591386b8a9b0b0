"""What one collective runs on: ranks in scale-up domains, their scale-up links and network share.

Built by ``clustersim.network.topology.Topology.group_fabric``, never from the catalog directly. A
switched scale-up fabric (NVLink through NVSwitch) is described by its per-device bandwidth alone; a
NeuronLink torus also by its shape (``Torus``), which the torus model (``clustersim.network.torus``)
reads."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from clustersim.errors import ClusterSimError


@dataclass(frozen=True, slots=True)
class Torus:
    """The NeuronLink chips of one group inside one instance, and the ring that joins instances.

    ``dims``: the extent of the group's chips along each torus dimension (a whole 4 x 4 trn2
    instance is ``(4, 4)``; four consecutive chips of one row ``(4,)``; one chip ``()``), each with
    its wrap-around link where the extent is the whole dimension (``wrap``). ``link_bytes_per_s``:
    one NeuronLink, one direction. ``ranks_per_chip``: members of the group on each chip (NeuronCores
    or logical cores; 1 where a rank is a chip). ``chip_stride``: chips between consecutive members
    (a group spread over every other chip shares its links with the group between, so its traffic
    takes that many hops). ``ring_nodes``: instances joined by the inter-instance NeuronLink ring
    (a Trn2 UltraServer: 4; otherwise 1), each chip to the same position of the next instance over
    ``ring_link_bytes_per_s`` per link and direction. ``chip_links``: NeuronLinks of each chip in the
    whole instance torus (0: ``links_per_chip``), the rate at which a chip moves data on itself.
    """

    dims: tuple[int, ...]
    wrap: tuple[bool, ...]
    link_bytes_per_s: float
    ranks_per_chip: int = 1
    chip_stride: int = 1
    ring_nodes: int = 1
    ring_link_bytes_per_s: float = 0.0
    chip_links: int = 0

    def __post_init__(self) -> None:
        if len(self.wrap) != len(self.dims) or any(d < 2 for d in self.dims):
            raise ClusterSimError(f"torus dimensions must be at least 2 chips, one wrap flag each, got {self.dims}")
        if not self.link_bytes_per_s > 0:
            raise ClusterSimError(f"NeuronLink bandwidth must be positive, got {self.link_bytes_per_s!r} B/s")
        if self.ranks_per_chip < 1 or self.chip_stride < 1 or self.ring_nodes < 1:
            raise ClusterSimError(
                f"ranks per chip, chip stride and ring instances must be at least 1, got "
                f"{self.ranks_per_chip}, {self.chip_stride}, {self.ring_nodes}"
            )
        if self.ring_nodes > 1 and not self.ring_link_bytes_per_s > 0:
            raise ClusterSimError(f"{self.ring_nodes} instances on a NeuronLink ring need its link bandwidth")

    @property
    def num_chips(self) -> int:
        """Chips the group's members span in one instance (its own and those between them)."""
        return math.prod(self.dims)

    def group(self, members_per_node: int, stride: int) -> Torus:
        """The torus a group sees: ``members_per_node`` ranks ``stride`` ranks apart on this instance's
        torus, whose ``ranks_per_chip`` are its devices per chip (ranks numbered chip by chip, chips
        along the first dimension first)."""
        per_chip = self.ranks_per_chip
        if stride < per_chip:
            members_on_chip = math.gcd(per_chip // stride, members_per_node)
            chip_stride, chips = 1, members_per_node // members_on_chip
        else:
            members_on_chip, chip_stride, chips = 1, stride // per_chip, members_per_node
        span, dims, wrap = chips * chip_stride, [], []
        for extent, closed in zip(self.dims, self.wrap, strict=True):
            used = min(extent, span)
            if used > 1:
                dims.append(used)
                wrap.append(used == extent and closed)
            span = -(-span // extent)
        return Torus(
            dims=tuple(dims),
            wrap=tuple(wrap),
            link_bytes_per_s=self.link_bytes_per_s,
            ranks_per_chip=members_on_chip,
            chip_stride=chip_stride if chips > 1 else 1,
            ring_nodes=self.ring_nodes,
            ring_link_bytes_per_s=self.ring_link_bytes_per_s,
            chip_links=self.injection_links,
        )

    @property
    def injection_links(self) -> int:
        """NeuronLinks of each chip in the whole instance torus."""
        return self.chip_links or self.links_per_chip

    @property
    def links_per_chip(self) -> int:
        """Links from each chip to other chips of the group: two along a dimension closed into a
        ring of 3 or more, one along an open line or a pair."""
        return sum(2 if wrap and d > 2 else 1 for d, wrap in zip(self.dims, self.wrap, strict=True))

    @property
    def mean_hops(self) -> float:
        """Mean shortest-path hops from a chip to the group's other chips (routed writes)."""
        if self.num_chips < 2:
            return 0.0
        total = 0
        for offset in itertools.product(*(range(d) for d in self.dims)):
            total += sum(min(k, d - k) if wrap else k for k, d, wrap in zip(offset, self.dims, self.wrap, strict=True))
        return total * self.chip_stride / (self.num_chips - 1)


@dataclass(frozen=True, slots=True)
class Fabric:
    """What a collective runs on: ``num_nodes`` servers of ``devices_per_node`` devices.

    Bandwidths are datasheet figures (per device per direction inside the node; all network cards
    of one node, one direction); the model applies its achieved-bandwidth fractions to them.

    The network adapter adds what NCCL's InfiniBand-tuned tables leave out: ``network_latency_s``
    on every inter-node hop (what NCCL's tuner calls ``latencyInter``; 0 for InfiniBand), whether
    NCCL's LL/LL128 protocols may cross it (``network_ll_protocols``).
    ``network_flush``: a network receive must be flushed (a loopback read through the NIC) before
    the GPU may use it, as NCCL does before Hopper and on C2C superchips (``ncclTopoNeedFlush``).
    """

    name: str
    devices_per_node: int
    num_nodes: int
    scaleup_bytes_per_s: float
    network_bytes_per_s: float
    in_network_reduction: bool
    network_latency_s: float = 0.0
    network_ll_protocols: bool = True
    network_flush: bool = False
    scaleup_link: str = "NVLink"  # the scale-up fabric's name, for labels only (the catalog's link type)
    torus: Torus | None = None  # NeuronLink's shape; None: a switched fabric (NVSwitch)
    family: str = ""  # the accelerator's family (hopper, blackwell): NCCL's NVLS constants differ per generation
    servers_per_node: int = 1  # servers one node of this fabric spans: > 1 on a multi-node NVLink domain (NVL72)

    @property
    def num_ranks(self) -> int:
        """Devices taking part."""
        return self.devices_per_node * self.num_nodes

    def __post_init__(self) -> None:
        if self.devices_per_node < 1:
            raise ClusterSimError(f"devices per node must be at least 1, got {self.devices_per_node}")
        if self.num_nodes < 1:
            raise ClusterSimError(f"nodes must be at least 1, got {self.num_nodes}")
        if self.num_ranks < 2 and self.num_nodes == 1:
            raise ClusterSimError("a collective needs at least 2 devices")
        if self.scaleup_bytes_per_s <= 0:
            raise ClusterSimError(f"{self.name}: scale-up bandwidth must be positive")
        if self.num_nodes > 1 and self.network_bytes_per_s <= 0:
            raise ClusterSimError(f"{self.name}: more than one node needs a network bandwidth")
        if not self.network_latency_s >= 0:
            raise ClusterSimError(f"{self.name}: network latency must be at least 0 s, got {self.network_latency_s!r}")
        if self.torus is not None and self.devices_per_node % self.torus.ranks_per_chip:
            raise ClusterSimError(
                f"{self.name}: {self.devices_per_node} devices per node do not fill chips of "
                f"{self.torus.ranks_per_chip} ranks"
            )
