"""A slice of the flow-level simulator's fat-tree as a packet-level topology.

The transport hosts are NIC ports of a ``flowsim`` ``FatTree`` (``host * nics_per_host + rail``). Each
directed fat-tree link that a route between two of them can cross becomes one port, at the link's
capacity (a failed link is left out, and so are the routes over it); switches add ``hop_latency_s``
per hop as elsewhere, the NIC ends ``host_latency_s`` too. The equal-cost routes are the fat-tree's:
one through the shared leaf; one per spine of the pod between two leaves of a pod; one per (spine,
core) pair between pods, in the order spine 0 core 0, spine 1 core 0, ... so that the first
``max_paths`` spread over the spines first. Only the ports of the slice's routes are made, so a
few NICs of a 20,000-GPU fabric make a small network.
"""

from __future__ import annotations

from collections.abc import Sequence

from clustersim.errors import ClusterSimError
from clustersim.network.flowsim.topology import FatTree
from clustersim.network.transport.links import Network, PortSpec
from clustersim.network.transport.topology import FabricSpec, Route, Topology

MAX_SLICE_PATHS = 255  # SRD tags carry a path in 8 bits


class _Ports:
    """Fat-tree link index -> packet port, made on first use."""

    def __init__(self, net: Network, tree: FatTree, spec: FabricSpec) -> None:
        self.net, self.tree, self.spec = net, tree, spec
        self.of: dict[int, int] = {}

    def get(self, link: int, *, host_side: bool = False, uplink: bool = False) -> int | None:
        """The port of ``link`` (None when the link has failed)."""
        if self.tree.failed[link]:
            return None
        if link not in self.of:
            spec = self.spec
            latency = spec.hop_latency_s + (spec.host_latency_s if host_side else 0.0)
            bits_per_s = float(self.tree.capacity_bytes_per_s[link]) * 8
            if uplink:  # the NIC's send queue: unbounded, where random loss applies
                port = PortSpec(bits_per_s, latency, loss=spec.loss)
            else:
                port = PortSpec(bits_per_s, latency, buffer_bytes=spec.buffer_bytes, ecn_bytes=spec.ecn_bytes)
            self.of[link] = self.net.add_port(port)
        return self.of[link]


def fat_tree_slice(
    net: Network, tree: FatTree, nics: Sequence[int], spec: FabricSpec | None = None, *, max_paths: int = 16
) -> Topology:
    """A topology whose hosts ``0..len(nics)-1`` are the fat-tree NIC ports ``nics``, with up to
    ``max_paths`` equal-cost routes between each pair (speeds from the tree, delays and buffers from
    ``spec``; its ``host_bits_per_s`` is not used)."""
    spec = spec or FabricSpec()
    if not 1 <= max_paths <= MAX_SLICE_PATHS:
        raise ClusterSimError(
            f"max_paths: {max_paths} is out of range (valid: 1..{MAX_SLICE_PATHS})", field="max_paths", value=max_paths
        )
    if len(set(nics)) != len(nics) or len(nics) < 2:
        raise ClusterSimError("a slice needs at least two distinct NIC ports", field="nics", value=list(nics))
    for nic in nics:
        if not 0 <= nic < tree.num_nics:
            raise ClusterSimError(f"NIC port {nic} is not in 0..{tree.num_nics - 1}", field="nics", value=nic)
    if spec.host_stack is not None:
        raise ClusterSimError("a fat-tree slice has no kernel stack ports", field="host_stack", value="set")
    topo = Topology(net, spec, len(nics))
    ports = _Ports(net, tree, spec)
    for nic in nics:
        up = ports.get(tree.nic_up0 + nic, host_side=True, uplink=True)
        down = ports.get(tree.nic_down0 + nic, host_side=True)
        if up is None or down is None:
            raise ClusterSimError(f"NIC port {nic} has a failed link", field="nics", value=nic)
        topo.uplinks.append(up)
        topo.downlinks.append(down)
    for a, src in enumerate(nics):
        for b, dst in enumerate(nics):
            if a != b:
                routes = _middles(tree, ports, src, dst, max_paths)
                if not routes:
                    raise ClusterSimError(f"no live route from NIC {src} to NIC {dst}", field="nics", value=[src, dst])
                topo._routes[(a, b)] = tuple((topo.uplinks[a], *m, topo.downlinks[b]) for m in routes)
    fabric = sorted({p for routes in topo._routes.values() for r in routes for p in r[1:-1]})
    topo.fabric_ports.extend(fabric)
    longest = max(len(routes) for routes in topo._routes.values())
    for path in range(longest):
        topo._path_ports[path] = sorted(
            {p for routes in topo._routes.values() if path < len(routes) for p in routes[path][1:-1]}
        )
    topo._declare_routes()
    return topo


def _middles(tree: FatTree, ports: _Ports, src: int, dst: int, max_paths: int) -> list[Route]:
    """The switch-to-switch ports of each live equal-cost route from NIC ``src`` to NIC ``dst``."""
    la, lb = int(tree.nic_leaf[src]), int(tree.nic_leaf[dst])
    if la == lb:
        return [()]
    u, c, per_pod = tree.leaf_uplinks, tree.spine_uplinks, tree.leaves_per_pod
    pa, pb = la // per_pod, lb // per_pod
    out: list[Route] = []
    if pa == pb:
        for j in range(u):
            hops: tuple[int | None, ...] = (
                ports.get(tree.leaf_up0 + la * u + j),
                ports.get(tree.leaf_down0 + lb * u + j),
            )
            if None not in hops:
                out.append(tuple(p for p in hops if p is not None))
            if len(out) == max_paths:
                break
        return out
    for m in range(c):
        for j in range(u):
            hops = (
                ports.get(tree.leaf_up0 + la * u + j),
                ports.get(tree.spine_up0 + (pa * u + j) * c + m),
                ports.get(tree.core_down0 + (pb * u + j) * c + m),
                ports.get(tree.leaf_down0 + lb * u + j),
            )
            if None not in hops:
                out.append(tuple(p for p in hops if p is not None))
            if len(out) == max_paths:
                return out
    return out
