"""Attention data parallel: a replica of a MoE model as groups of ranks, each group running its own requests
through attention and the dense layers, the experts split over every group (TensorRT-LLM's
``enable_attention_dp`` beside ``--ep``, its "DEP" layouts; SGLang's ``--enable-dp-attention``; vLLM's
data-parallel attention with expert parallelism). ``ServingSystem.attention_dp`` holds the groups;
``clustersim.serving.engine.step_times`` prices one rank's step:

* attention, the dense layers, logits, norms and the KV cache: the rank's own group's sequences (``1 /
  attention_dp`` of the stage's), with the dense weights whole (``tp`` splits them as before) and every KV head of
  its sequences (a latent, MLA's, held once per rank instead of once per TP rank);
* the routed experts: each rank holds ``experts / (tp x attention_dp)`` and runs them on every token of the stage
  routed to them; each MoE layer brings the tokens to the experts and back (``ServingSystem.moe_exchange``,
  ``clustersim.serving.moe_exchange``): by default it gathers the groups' tokens onto every rank and
  reduce-scatters the experts' outputs back (16-bit), the exchange TensorRT-LLM's fused MoE runs with attention DP,
  every rank then paying the per-token routing and permutation cost (``moe_token_layer_s``) on the gathered
  tokens; with the all-to-all (``TRTLLM_MOE_ENABLE_ALLTOALL_WITHOUT_ALLGATHER``, which NVIDIA's MLPerf v5.1
  DeepSeek-R1 configs set: closed/NVIDIA/configs/GB300-NVL72_GB300-288GB_aarch64x72_TRT/Offline/deepseek-r1.py)
  each rank routes only the tokens it receives;
* the batch: each group caches and schedules its own sequences, so a replica holds ``attention_dp`` times a
  rank's KV capacity and engine caps (trtllm-bench sizes ``max_batch_size`` per rank under attention DP, its
  ``--tp`` the whole group: ``clustersim.serving.bench_sizing``).

Not modelled: the groups' imbalance (a rank with more sequences holds the others at each exchange) and the
experts' (routing skew); TensorRT-LLM's perf overview (@03e27c7d, its DEP columns, the gather) and MLPerf
Inference v5.1's DeepSeek-R1 runs (the all-to-all) are the evidence (``validation/project/inference.jsonl``,
``trtllm_perf2_*``, ``mlperf51_deepseek-r1_*``)."""

from __future__ import annotations

from clustersim.errors import ClusterSimError
from clustersim.serving.engine import ServingSystem
from clustersim.serving.engines import EngineProfile
from clustersim.workload.transformer import Transformer

ATTENTION_DP_ENGINES = ("tensorrt-llm", "vllm", "sglang")  # their data-parallel attention beside expert parallelism


def check_attention_dp(model: Transformer, system: ServingSystem, profile: EngineProfile) -> None:
    """Attention data parallel splits a MoE model's experts over its groups: refused for a dense model (its groups
    are replicas: ``dp``), for experts that do not divide over the stage's ranks, and on an engine without it."""
    groups = system.attention_dp
    if groups == 1:
        return
    if model.moe is None:
        raise ClusterSimError(
            f"attention_dp: {groups} groups share a MoE model's experts; {model.name} is dense, so its groups would be "
            f"independent replicas: give dp {groups} instead",
            field="attention_dp",
            value=groups,
        )
    ranks = system.tp * groups
    if model.moe.experts % ranks:
        raise ClusterSimError(
            f"attention_dp: {model.name}'s {model.moe.experts} experts do not split evenly over tp {system.tp} x "
            f"attention dp {groups} = {ranks} ranks",
            field="attention_dp",
            value=groups,
        )
    if profile.framework not in ATTENTION_DP_ENGINES:
        raise ClusterSimError(
            f"attention_dp: {profile.name} has no data-parallel attention (engines with it: "
            f"{', '.join(ATTENTION_DP_ENGINES)})",
            field="attention_dp",
            value=groups,
        )
