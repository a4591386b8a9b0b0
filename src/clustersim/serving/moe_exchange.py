"""How the MoE layers of an attention-data-parallel replica move tokens between its ranks.

Each rank runs its own group's tokens through attention; each MoE layer must bring every token to the ranks
holding its experts and the experts' outputs back (``clustersim.serving.attention_dp``). Two ways:

* ``gather`` (TensorRT-LLM's default under ``enable_attention_dp``): the groups' tokens are all-gathered onto
  every rank and the experts' outputs reduce-scattered back, in 16 bits; every rank routes and permutes every
  token of the stage (``moe_token_layer_s`` on all of them).
* ``alltoall`` (``TRTLLM_MOE_ENABLE_ALLTOALL_WITHOUT_ALLGATHER=1``, the WIDEEP backend; SGLang's and vLLM's
  DeepEP all-to-all): each rank sends each of its tokens once to every rank holding one of its ``top_k``
  experts and receives the outputs back (dispatch and combine, 16 bits each). With ``R`` ranks each holding
  ``1/R`` of the experts, a token reaches ``R (1 - (1 - 1/R)^top_k)`` ranks on average, so a rank receives, and
  routes and permutes, that share of the stage's tokens over ``R``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from clustersim.network.collectives import Op
from clustersim.serving.memory import ACTIVATION_BYTES, stage_share
from clustersim.serving.serving_system import ServingSystem
from clustersim.workload.transformer import Transformer

FloatArray = npt.NDArray[np.float64]


def ranks_reached(ranks: int, top_k: int) -> float:
    """Ranks a token's ``top_k`` experts sit on, on average, with the experts split evenly over ``ranks``."""
    return ranks * (1.0 - (1.0 - 1.0 / ranks) ** top_k)


def routed_token_share(model: Transformer, system: ServingSystem) -> float:
    """The share of the stage's tokens each rank routes and permutes in a MoE layer: all of them after a gather,
    the copies it receives under an all-to-all (1 without attention data parallel: a rank sees every token)."""
    if system.moe_exchange != "alltoall" or model.moe is None:
        return 1.0
    ranks = system.tp * system.attention_dp
    return ranks_reached(ranks, model.moe.top_k) / ranks


def exchange_s(model: Transformer, system: ServingSystem, tokens: FloatArray) -> FloatArray:
    """Seconds per step a rank spends moving a stage of ``tokens`` tokens to the experts and back, over the MoE
    layers of one pipeline stage (0 without attention data parallel or MoE)."""
    if system.attention_dp == 1 or system.ep_fabric is None or model.moe is None:
        return np.zeros_like(tokens)
    per_token = model.expert_input * ACTIVATION_BYTES  # a latent MoE exchanges its latent rows
    if system.moe_exchange == "alltoall":
        ranks = system.tp * system.attention_dp
        sent = (tokens / ranks * ranks_reached(ranks, model.moe.top_k) * per_token).ravel()  # its share's copies
        moved = 2.0 * system.cost.time_s(Op.ALLTOALL, sent, system.ep_fabric)  # dispatch and combine
    else:
        gathered = (tokens * per_token).ravel()
        moved = system.cost.time_s(Op.ALL_GATHER, gathered, system.ep_fabric) + system.cost.time_s(
            Op.REDUCE_SCATTER, gathered, system.ep_fabric
        )
    layers = model.moe_layers * stage_share(model, system.pp)
    return np.asarray(layers * moved, dtype=np.float64).reshape(np.shape(tokens))
