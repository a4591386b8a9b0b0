"""Disaggregated prefill and decode: two pools of workers, each request's KV cache moved between them.

As current serving stacks run it (DistServe, Zhong et al., OSDI 2024, arXiv 2401.09670; NVIDIA Dynamo,
https://docs.nvidia.com/dynamo/archive/0.2.0/architecture/disagg_serving.html; vLLM's disaggregated
prefill, https://docs.vllm.ai/en/latest/features/disagg_prefill.html; SGLang's PD disaggregation): a
prefill worker runs the prompt and makes the first token, its KV cache goes to a decode worker (GPU to
GPU: NIXL over NVLink inside a node, RDMA across nodes), and the decode worker makes the rest. Each pool
has its own worker count and tensor-parallel degree (``--disaggregate 1x4:2x2``: one prefill worker of tp
4, two decode workers of tp 2; ``P:D`` takes ``--tp`` for both).

**Placement**: the pools share one instance where their devices fit it (the transfer over NVLink), else
each pool gets its own instances (the transfer over the instances' network, e.g. EFA on p5).

**Transfer**: every prefill device sends its shard of the request's KV cache to a decode device at once,
so a link carries the larger of a device's shares at the two tensor-parallel degrees (``kv_bytes_per_token
_layer``; a windowed layer holds at most its window), priced as a point-to-point ``sendrecv`` on that fabric
by the project's collective cost model (``clustersim.network.cost``: latency plus bytes over the achieved
bandwidth, NVLink's or one device's network share). A transfer holds its prefill and its decode worker's
links: each worker sends or receives one at a time (``clustersim.serving.sim_disaggregated``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError
from clustersim.network.collectives import Op
from clustersim.network.cost import ANALYTIC, CollectiveCost
from clustersim.network.fabric import Fabric
from clustersim.network.topology import fabric_for_instance
from clustersim.serving.engine import ServingSystem
from clustersim.serving.formats import ServingPrecision
from clustersim.serving.memory import cached_token_layers, kv_bytes_per_token_layer
from clustersim.system import system_for_instance
from clustersim.workload.transformer import Transformer

FloatArray = npt.NDArray[np.float64]
FORMS = "P:D (prefill and decode workers at --tp) or PxTP:DxTP (each pool's tp too), e.g. 1:1 or 1x4:2x2"


@dataclass(frozen=True)
class Pools:
    """Workers per pool and their tensor-parallel degree (None: the run's ``--tp``)."""

    prefill_workers: int
    decode_workers: int
    prefill_tp: int | None = None
    decode_tp: int | None = None


def parse_pools(text: str, field: str = "--disaggregate") -> Pools:
    """``P:D`` or ``PxTP:DxTP`` as ``Pools``; anything else one ``ClusterSimError`` naming ``field``."""
    match = re.fullmatch(r"\s*(\d+)(?:x(\d+))?\s*:\s*(\d+)(?:x(\d+))?\s*", text)
    if match is None:
        raise ClusterSimError(f"{field}: {text!r} is not {FORMS}", field=field, value=text)
    p, p_tp, d, d_tp = (None if g is None else int(g) for g in match.groups())
    assert p is not None and d is not None
    for what, value in (("prefill workers", p), ("decode workers", d), ("prefill tp", p_tp), ("decode tp", d_tp)):
        if value is not None and value < 1:
            raise ClusterSimError(f"{field}: {what} must be at least 1, got {text!r}; use {FORMS}", field=field)
    return Pools(p, d, p_tp, d_tp)


@dataclass(frozen=True)
class Deployment:
    """The two pools (``dp``: their workers), where they sit and what carries the KV cache between them."""

    model: Transformer
    prefill: ServingSystem
    decode: ServingSystem
    instances: int  # one: both pools in it; else the prefill pool's then the decode pool's
    fabric: Fabric
    over_network: bool
    kv_precision: ServingPrecision
    cost: CollectiveCost = ANALYTIC

    def link_bytes(self, tokens: npt.ArrayLike) -> FloatArray:
        """Bytes one link carries for a prompt of ``tokens``: a device's share, the larger of the two pools'."""
        share = max(kv_bytes_per_token_layer(self.model, self.kv_precision, pool.tp) for pool in self.pools)
        return np.asarray(cached_token_layers(self.model, tokens) * share, dtype=np.float64)

    def request_bytes(self, tokens: npt.ArrayLike) -> FloatArray:
        """The whole KV cache of a prompt of ``tokens`` (every KV head once)."""
        return np.asarray(
            cached_token_layers(self.model, tokens) * kv_bytes_per_token_layer(self.model, self.kv_precision)
        )

    def transfer_s(self, tokens: npt.ArrayLike) -> FloatArray:
        """Seconds to move the KV cache of prompts of ``tokens`` (each alone on its links)."""
        size = np.atleast_1d(self.link_bytes(tokens))
        return np.asarray(self.cost.time_s(Op.SENDRECV, size, self.fabric), dtype=np.float64).reshape(size.shape)

    def transfer_one_s(self, tokens: float) -> float:
        """Seconds to move the KV cache of one prompt of ``tokens`` (alone on its links)."""
        return float(self.transfer_s(tokens).reshape(-1)[0])

    @property
    def pools(self) -> tuple[ServingSystem, ServingSystem]:
        return self.prefill, self.decode

    @property
    def link(self) -> str:
        return f"network between {self.fabric.name}" if self.over_network else f"{self.fabric.scaleup_link} in one node"

    def to_json(self) -> dict[str, Any]:
        return {
            "pools": {
                name: {"workers": pool.dp, "tp": pool.tp, "devices": pool.num_devices}
                for name, pool in (("prefill", self.prefill), ("decode", self.decode))
            },
            "instances": self.instances,
            "link": self.link,
        }


def deploy(
    catalog: Catalog, instance: str, pools: Pools, tp: int, model: Transformer, kv_precision: ServingPrecision
) -> Deployment:
    """The pools on ``instance``s: each worker's tp devices inside one instance; both pools in one instance
    where they fit, else on instances of their own."""
    entry = catalog.instance(instance)
    per_node = int(entry.num_accelerators.value)
    base = system_for_instance(catalog, entry.id, 1)
    systems = []
    for name, workers, degree in (
        ("prefill", pools.prefill_workers, pools.prefill_tp or tp),
        ("decode", pools.decode_workers, pools.decode_tp or tp),
    ):
        if degree > per_node:
            raise ClusterSimError(
                f"--disaggregate: a {name} worker's tp {degree} does not fit the {per_node} devices of one {entry.id}",
                field="--disaggregate",
                value=degree,
            )
        systems.append(ServingSystem.on(base, entry.id, tp=degree, pp=1, dp=workers))
    prefill, decode = systems
    if prefill.num_devices + decode.num_devices <= per_node:
        instances, fabric, network = 1, fabric_for_instance(catalog, entry, 1), False
    else:
        instances = sum(math.ceil(pool.dp / (per_node // pool.tp)) for pool in systems)
        fabric, network = fabric_for_instance(catalog, entry, 2), True
    return Deployment(model, prefill, decode, instances, fabric, network, kv_precision)
