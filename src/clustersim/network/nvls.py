"""NVLink SHARP (NVLS): NCCL's all-reduce that reduces inside the NVSwitch, within one NVLink domain
(NVLS) and across domains (NVLS tree), as the analytic model prices it.

What NCCL does (NVIDIA/nccl @ v2.26.2-1, f44ac759, the version of the GB200 runs in the ground truth):

* A multi-node NVLink domain (MNNVL, GB200 NVL72) is one NCCL node: ``src/graph/topo.cc`` fuses the
  topologies of the clique's ranks, and ``src/init.cc`` counts nodes by the ring's first rank, so a
  72-GPU rack prices as one node and NCCL picks NVLS inside it, NVLS tree (or ring, tree) across.
* NVLS works in loops: each of ``nvlsChannels`` CTAs (``src/transport/nvls.cc``: 16 on Hopper,
  ``NVLS_NCHANNELS_SM90``; 32 on Blackwell, ``NVLS_NCHANNELS_SM100``) moves ``nHeads`` chunks of
  ``NCCL_NVLS_CHUNKSIZE`` (128 KiB) per loop (``src/device/all_reduce.h``, ``loopCount = nHeads *
  chunkSize``); the heads are at most ``NCCL_MAX_NVLS_ARITY`` = 32 GPUs (``src/include/device.h``;
  ``src/graph/search.cc`` caps the NVLS graph at ``min(32, GPUs)``). A loop is what the pipeline
  holds in flight, so the message-size ramp scales with it: 16 MiB on 8 H100, 128 MiB on 72 GB200.
* NCCL's tuner prices NVLS tree at ``min(bwIntra, nNodes <= 2 ? bwInter : bwInter / 2)`` per channel
  (``src/graph/tuning.cc``): the tree halves the heads' network share beyond two nodes, never the
  NVLS stage. It chooses by that price.
* NVLS's achieved fraction differs by generation: NCCL's tuner (``nvlsEfficiency``, tuning.cc at
  master 5067397c) holds 0.85 on Hopper and 0.74 on Blackwell.

What it achieves on a multi-node NVLink domain (CoreWeave's GB200 NVL72 runs, NCCL 2.26.2: 2 racks
reach the one-rack NVLS bandwidth, 20 racks half of it): across more than two domains the NVLS
heads' whole pipeline runs at the tree's rate, not only their network share. So there the achieved
bandwidth is ``tree factor x min(NVLS, heads' network)`` while NCCL still chooses by its own price
(``choice_algbw``); on a single-server domain (8-GPU HGX) the two agree, ``min(NVLS, tree factor x
heads' network)``. That split rests on one source (CoreWeave); it is a stated prior, not a fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

NVLS_CHUNK_BYTES = 128 * 1024  # NCCL_NVLS_CHUNKSIZE default (src/transport/nvls.cc)
MAX_NVLS_HEADS = 32  # NCCL_MAX_NVLS_ARITY (src/include/device.h)
_NVLS_CHANNELS = {"hopper": 16, "blackwell": 32}  # NVLS_NCHANNELS_SM90 / _SM100 (src/transport/nvls.cc)
_DEFAULT_NVLS_CHANNELS = 16  # a family NCCL's table does not name: Hopper's


@pydantic_dataclass(frozen=True, slots=True, kw_only=True, config=ConfigDict(extra="forbid"))
class PerGeneration:
    """One factor per accelerator family that NCCL's tables tell apart (``hopper``, ``blackwell``),
    relative to the calibration's Hopper-fitted value; any other family takes 1."""

    hopper: float = Field(gt=0, le=2, description="Hopper (H100, H200).")
    blackwell: float = Field(gt=0, le=2, description="Blackwell (B200, GB200).")

    def factor(self, family: str) -> float:
        """The factor of ``family`` (1 for a family not listed)."""
        value: float = getattr(self, family) if family in ("hopper", "blackwell") else 1.0
        return value


def nvls_heads(devices_per_domain: int) -> int:
    """GPUs of one NVLink domain that NCCL makes NVLS heads: all of them, at most 32."""
    return max(1, min(devices_per_domain, MAX_NVLS_HEADS))


def nvls_loop_bytes(family: str, devices_per_domain: int) -> float:
    """Bytes one loop of NCCL's NVLS kernel moves: channels x heads x chunk (16 MiB on 8 H100)."""
    channels = _NVLS_CHANNELS.get(family, _DEFAULT_NVLS_CHANNELS)
    return float(channels * nvls_heads(devices_per_domain) * NVLS_CHUNK_BYTES)


def nvls_ramp_bytes(family: str, devices_per_domain: int, ramp_loops: float, num_domains: int = 1) -> float:
    """The Simple ramp's half size of NVLS (one domain) or NVLS tree (``num_domains`` > 1): ``ramp_loops``
    loops for the NVLS stage, plus one loop per tree hop up and down (2 log2 domains) across domains."""
    tree_loops = 2 * math.log2(num_domains) if num_domains > 1 else 0.0
    return (ramp_loops + tree_loops) * nvls_loop_bytes(family, devices_per_domain)


@dataclass(frozen=True, slots=True)
class NvlsTree:
    """NVLS tree across domains: what it achieves, what NCCL's tuner believes, and which bound binds."""

    algbw_bytes_per_s: float
    choice_algbw_bytes_per_s: float
    bound: str


def nvls_tree(
    nvls_bytes_per_s: float, heads_network_bytes_per_s: float, tree_factor: float, *, mnnvl: bool
) -> NvlsTree:
    """NVLS inside each domain (``nvls_bytes_per_s``), a tree across them over the heads' network
    (``heads_network_bytes_per_s``, achieved), ``tree_factor`` the tree's share (1 on 2 domains, 1/2
    beyond 3). On a multi-server NVLink domain (``mnnvl``) the factor slows the whole head pipeline."""
    choice = min(nvls_bytes_per_s, tree_factor * heads_network_bytes_per_s)
    network_bound = tree_factor * heads_network_bytes_per_s < nvls_bytes_per_s
    if not mnnvl:
        return NvlsTree(choice, choice, "network (tree)" if network_bound else "NVLink SHARP")
    achieved = tree_factor * min(nvls_bytes_per_s, heads_network_bytes_per_s)
    if heads_network_bytes_per_s < nvls_bytes_per_s:
        bound = "network (tree)"
    else:
        bound = "NVLink SHARP (heads' tree)" if tree_factor < 1 else "NVLink SHARP"
    return NvlsTree(achieved, choice, bound)
