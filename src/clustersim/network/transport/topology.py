"""Packet-level topologies: a dumbbell and a two-tier leaf-spine with N equal-cost paths.

Every host has an uplink (host to switch; the host's send queue, unbounded, where random loss is
applied to each packet a host sends, data and acknowledgements alike) and a downlink (switch to host,
a switch port with a finite buffer). A leaf-spine joins leaves through ``num_paths`` spines, so two
hosts on different leaves have ``num_paths`` equal-cost routes. Optionally each host has a kernel
stack port at each end of its routes (a per-packet cost: the TCP-like transport's host).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clustersim.errors import ClusterSimError
from clustersim.network.transport.links import Network, PortSpec

Route = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class FabricSpec:
    """Speeds, delays, buffers and loss of a packet-level fabric."""

    host_bits_per_s: float = 100e9
    fabric_bits_per_s: float | None = None  # switch-to-switch links; None = host speed
    hop_latency_s: float = 0.5e-6  # cable plus switch pipeline, per hop
    host_latency_s: float = 1.0e-6  # NIC processing, each way, added on the host's links
    buffer_bytes: float = 1_000_000  # per switch port
    ecn_bytes: float = float("inf")
    loss: float = 0.0  # per packet a host sends
    host_stack: PortSpec | None = None  # a kernel stack port at each end of a route

    def __post_init__(self) -> None:
        if not 0 <= self.loss < 1:
            raise ClusterSimError(f"loss: {self.loss!r} is not a probability in [0, 1)", field="loss", value=self.loss)
        if not self.host_bits_per_s > 0:
            raise ClusterSimError(
                f"host_bits_per_s: {self.host_bits_per_s!r} must be > 0",
                field="host_bits_per_s",
                value=self.host_bits_per_s,
            )


@dataclass(slots=True)
class Topology:
    """A network of hosts and the routes between them."""

    net: Network
    spec: FabricSpec
    num_hosts: int
    uplinks: list[int] = field(default_factory=list)
    downlinks: list[int] = field(default_factory=list)
    fabric_ports: list[int] = field(default_factory=list)
    stack_tx: list[int] = field(default_factory=list)
    stack_rx: list[int] = field(default_factory=list)
    _routes: dict[tuple[int, int], tuple[Route, ...]] = field(default_factory=dict)
    _path_ports: dict[int, list[int]] = field(default_factory=dict)  # path index -> its fabric ports

    def routes(self, src: int, dst: int) -> tuple[Route, ...]:
        """The equal-cost routes from host ``src`` to host ``dst``, path 0 first."""
        for host in (src, dst):
            if not 0 <= host < self.num_hosts:
                raise ClusterSimError(f"host {host} is not in 0..{self.num_hosts - 1}", field="host", value=host)
        if src == dst:
            raise ClusterSimError(f"a flow needs two hosts, got {src} to itself", field="host", value=src)
        return self._routes[(src, dst)]

    def path_ports(self, path: int) -> list[int]:
        """The switch-to-switch ports of equal-cost path ``path`` (where background load or an ECMP
        collision goes)."""
        return self._path_ports[path]

    def _add_hosts(self) -> None:
        spec = self.spec
        up = PortSpec(spec.host_bits_per_s, spec.host_latency_s + spec.hop_latency_s, loss=spec.loss)
        down = PortSpec(
            spec.host_bits_per_s,
            spec.host_latency_s + spec.hop_latency_s,
            buffer_bytes=spec.buffer_bytes,
            ecn_bytes=spec.ecn_bytes,
        )
        for _ in range(self.num_hosts):
            self.uplinks.append(self.net.add_port(up))
            self.downlinks.append(self.net.add_port(down))
            if spec.host_stack is not None:
                self.stack_tx.append(self.net.add_port(spec.host_stack))
                self.stack_rx.append(self.net.add_port(spec.host_stack))

    def _wrap(self, src: int, dst: int, middle: Route) -> Route:
        route = (self.uplinks[src], *middle, self.downlinks[dst])
        if self.stack_tx:
            route = (self.stack_tx[src], *route, self.stack_rx[dst])
        return route

    def _declare_routes(self) -> None:
        self.net.set_routes(route for routes in self._routes.values() for route in routes)

    def _fabric_port(self) -> int:
        spec = self.spec
        port = self.net.add_port(
            PortSpec(
                spec.fabric_bits_per_s or spec.host_bits_per_s,
                spec.hop_latency_s,
                buffer_bytes=spec.buffer_bytes,
                ecn_bytes=spec.ecn_bytes,
            )
        )
        self.fabric_ports.append(port)
        return port


def leaf_spine(
    net: Network, spec: FabricSpec, *, hosts_per_leaf: int, num_leaves: int = 2, num_paths: int = 1
) -> Topology:
    """``num_leaves`` leaves of ``hosts_per_leaf`` hosts joined by ``num_paths`` spines: hosts on two
    leaves have ``num_paths`` routes (host, leaf, spine, leaf, host), hosts on one leaf have one."""
    for name, value in (("hosts_per_leaf", hosts_per_leaf), ("num_leaves", num_leaves), ("num_paths", num_paths)):
        if value < 1:
            raise ClusterSimError(f"{name}: {value} must be at least 1", field=name, value=value)
    topo = Topology(net, spec, hosts_per_leaf * num_leaves)
    topo._add_hosts()
    up = [[topo._fabric_port() for _ in range(num_paths)] for _ in range(num_leaves)]  # leaf -> spine
    down = [[topo._fabric_port() for _ in range(num_paths)] for _ in range(num_leaves)]  # spine -> leaf
    for path in range(num_paths):
        topo._path_ports[path] = [port for leaf in range(num_leaves) for port in (up[leaf][path], down[leaf][path])]
    for src in range(topo.num_hosts):
        for dst in range(topo.num_hosts):
            if src == dst:
                continue
            a, b = src // hosts_per_leaf, dst // hosts_per_leaf
            if a == b:
                topo._routes[(src, dst)] = (topo._wrap(src, dst, ()),)
            else:
                topo._routes[(src, dst)] = tuple(topo._wrap(src, dst, (up[a][s], down[b][s])) for s in range(num_paths))
    topo._declare_routes()
    return topo


def dumbbell(net: Network, spec: FabricSpec, *, hosts_per_side: int) -> Topology:
    """Two switches of ``hosts_per_side`` hosts each, joined by one bottleneck link each way (the
    fabric speed): one route between sides, host, switch, switch, host."""
    if hosts_per_side < 1:
        raise ClusterSimError(
            f"hosts_per_side: {hosts_per_side} must be at least 1", field="hosts_per_side", value=hosts_per_side
        )
    topo = Topology(net, spec, 2 * hosts_per_side)
    topo._add_hosts()
    across = [topo._fabric_port(), topo._fabric_port()]  # left to right, right to left
    topo._path_ports[0] = list(across)
    for src in range(topo.num_hosts):
        for dst in range(topo.num_hosts):
            if src == dst:
                continue
            a, b = src // hosts_per_side, dst // hosts_per_side
            middle: Route = () if a == b else (across[a],)
            topo._routes[(src, dst)] = (topo._wrap(src, dst, middle),)
    topo._declare_routes()
    return topo
