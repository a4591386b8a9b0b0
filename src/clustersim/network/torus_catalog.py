"""The NeuronLink torus of an instance, read from the catalog's domains (``Torus`` for the topology).

A ``torus_2d`` domain of ``N`` chips is a square ``sqrt(N) x sqrt(N)`` torus (16 chips: 4 x 4, as AWS
draws trn1 and states for trn2, aws-neuron-sdk ``about-neuron/arch/neuron-hardware/trn2-arch.rst``
@81ce03ae); each chip has two links per dimension, so one link carries the domain's bandwidth per
chip and direction over ``2 x dimensions``. A ``ring`` domain of several instances (a Trn2
UltraServer) joins the chips at the same position of each instance; its links carry what the ring
domain lists per chip beyond the instance's torus (1,280 - 1,024 = 256 GB/s on Trainium2), over the
two ring neighbours.
"""

from __future__ import annotations

import math

from clustersim.catalog.registry import Catalog
from clustersim.catalog.schema import Accelerator, Domain, DomainTopology, Instance, Kind
from clustersim.errors import ClusterSimError
from clustersim.network.fabric import Torus


def _per_chip_per_direction(domain: Domain) -> float:
    """What one chip of ``domain`` sends, bytes/s (the catalog's aggregate is both directions)."""
    return domain.aggregate_bandwidth_bidirectional_bytes_per_s.value / domain.num_accelerators.value / 2


def _domains(catalog: Catalog, accelerator: Accelerator) -> list[Domain]:
    return [d for d in catalog.list(Kind.DOMAIN) if isinstance(d, Domain) and d.accelerator == accelerator.id]


def instance_torus(
    catalog: Catalog, accelerator: Accelerator, instance: Instance | None, devices_per_node: int
) -> Torus | None:
    """The torus of ``instance`` (or, without one, of this accelerator's catalogued torus domain of the
    node's chips) with ``devices_per_node`` ranks on it; None where the chips are not on a torus."""
    chips = int(instance.num_accelerators.value) if instance else 0
    domain = None
    if instance is not None and instance.intra_node.domain and instance.intra_node.domain in catalog:
        entry = catalog.typed(instance.intra_node.domain, Domain)
        domain = entry if entry.topology in (DomainTopology.TORUS_2D, DomainTopology.RING) else None
    elif instance is None:
        tori = [d for d in _domains(catalog, accelerator) if d.topology is DomainTopology.TORUS_2D]
        domain = next((d for d in tori if devices_per_node % int(d.num_accelerators.value) == 0), None)
        chips = int(domain.num_accelerators.value) if domain else 0
    if domain is None or chips < 1:
        return None
    ring_nodes, ring_link = 1, 0.0
    torus_domain = domain
    if domain.topology is DomainTopology.RING:
        size = int(domain.num_accelerators.value)
        inner = [
            d
            for d in _domains(catalog, accelerator)
            if d.topology is DomainTopology.TORUS_2D and int(d.num_accelerators.value) == chips
        ]
        if size % chips or not inner:
            raise ClusterSimError(
                f"domain {domain.id}: a ring of {size} chips over instances of {chips} needs a catalogued "
                f"{chips}-chip torus_2d domain of {accelerator.id}",
                field="domain",
                value=domain.id,
            )
        torus_domain = inner[0]
        ring_nodes = size // chips
        ring_link = (_per_chip_per_direction(domain) - _per_chip_per_direction(torus_domain)) / 2
    side = math.isqrt(chips)
    if side * side != chips or side < 2:
        raise ClusterSimError(
            f"domain {torus_domain.id}: a 2D torus of {chips} chips is not square; the torus model needs its sides",
            field="domain",
            value=torus_domain.id,
        )
    if devices_per_node % chips:
        raise ClusterSimError(
            f"{devices_per_node} devices per node do not fill {chips} chips", field="devices_per_node"
        )
    return Torus(
        dims=(side, side),
        wrap=(True, True),
        link_bytes_per_s=_per_chip_per_direction(torus_domain) / 4,
        ranks_per_chip=devices_per_node // chips,
        ring_nodes=ring_nodes,
        ring_link_bytes_per_s=ring_link,
    )
