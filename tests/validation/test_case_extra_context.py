"""The extra context a case may carry beyond the format's fields, and the reader takes: latent attention
(``model.mla``), dense-first MoE models (``dense_layers``, ``dense_ffn_hidden``), sliding windows
(``sliding_window``, ``window_layers``) and the expert all-to-all overlap (``parallel.ep_overlap``). Without
them the reader prices what the format says, and reports what it assumed."""

from __future__ import annotations

from typing import Any

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.validation.training import case_setup, predict_training_case
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
# DeepSeek-V3 as the format's cases carry it (Megatron-Core's names), and as the zoo has it.
DEEPSEEK_V3 = {
    "name": "deepseek-v3",
    "layers": 61,
    "hidden": 7168,
    "ffn_hidden": 2048,
    "heads": 128,
    "kv_heads": 128,
    "head_dim": 128,
    "vocab": 129280,
    "seq_len": 4096,
    "ffn_type": "swiglu",
    "moe": {"experts": 256, "top_k": 8, "shared_experts": 1},
    "mla": {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_head_dim": 128, "qk_pos_emb_head_dim": 64, "v_head_dim": 128},
    "dense_layers": 3,
    "dense_ffn_hidden": 18432,
}


def _case(model: dict[str, Any], **parallel: Any) -> dict[str, Any]:
    layout = {"tp": 1, "pp": 8, "dp": 32, "cp": 1, "ep": 32, "vp": 2, "micro_batch": 1, "global_batch": 4096}
    return {
        "id": "t_extra",
        "kind": "training",
        "source": "test",
        "model": model,
        "system": {"accelerator": "h100-sxm", "devices": 256, "devices_per_node": 8},
        "parallel": layout | parallel,
        "precision": "bf16",
        "measured": {"step_time_s": 1.0},
        "software": {"framework": "megatron"},
    }


def test_latent_attention_and_dense_first_layers_make_the_zoos_deepseek_v3() -> None:
    model = case_setup(_case(DEEPSEEK_V3), CATALOG).model
    zoo = load_model("deepseek-v3", use_env=False)
    assert model.mla == zoo.mla and model.head_dim == zoo.head_dim == 192
    assert model.dense_layers == zoo.dense_layers == 3
    assert model.ffn_hidden == zoo.ffn_hidden == 18432 and model.expert_ffn == zoo.expert_ffn == 2048
    assert model.num_params() == zoo.num_params()
    # Without the extra context the same case is a 128-head MHA model with every layer MoE: larger.
    plain = {k: v for k, v in DEEPSEEK_V3.items() if k not in ("mla", "dense_layers", "dense_ffn_hidden")}
    assert case_setup(_case(plain), CATALOG).model.num_params() > 1.05 * zoo.num_params()


def test_ep_overlap_is_read_and_an_unstated_one_is_reported_as_assumed() -> None:
    stated = case_setup(_case(DEEPSEEK_V3, ep_overlap=True), CATALOG)
    assert stated.layout.ep_overlap is True and "ep_overlap" not in stated.assumed
    unstated = case_setup(_case(DEEPSEEK_V3), CATALOG)
    assert unstated.layout.ep_overlap is None and unstated.assumed["ep_overlap"] is False  # megatron's default
    # The overlap hides cross-node all-to-alls: the same run is faster with it.
    assert predict_training_case(_case(DEEPSEEK_V3, ep_overlap=True), "step_time_s", CATALOG) < predict_training_case(
        _case(DEEPSEEK_V3, ep_overlap=False), "step_time_s", CATALOG
    )


def test_a_stated_board_power_caps_the_training_clock() -> None:
    """``system.power_W`` below the catalogued TDP (an H100 SXM at 500 W of 700) slows the compute-bound
    work by (500 / 700)^(1/3); at the TDP, or unstated, nothing changes."""
    dense = {k: v for k, v in DEEPSEEK_V3.items() if k not in ("moe", "mla", "dense_layers", "dense_ffn_hidden")}
    dense |= {"layers": 8, "hidden": 4096, "ffn_hidden": 14336, "heads": 32, "kv_heads": 8, "vocab": 32000}
    case = _case(dense, pp=1, dp=8, ep=1, vp=1, global_batch=64) | {
        "system": {"accelerator": "h100-sxm", "devices": 8, "devices_per_node": 8}
    }
    capped = case | {"system": case["system"] | {"power_W": 500}}
    at_tdp = case | {"system": case["system"] | {"power_W": 700}}
    assert case_setup(capped, CATALOG).system.compute_clock_ratio == (500 / 700) ** (1 / 3)
    plain = predict_training_case(case, "step_time_s", CATALOG)
    assert predict_training_case(at_tdp, "step_time_s", CATALOG) == plain
    slowed = predict_training_case(capped, "step_time_s", CATALOG)
    assert plain < slowed < plain / (500 / 700) ** (1 / 3)  # memory-bound work and communication do not slow


def test_a_case_named_after_the_zoos_deepseek_v3_is_routed_to_at_most_four_of_its_eight_groups() -> None:
    """The format has no field for group-limited routing; the zoo's entry of the same name and routing
    gives it (config.json n_group 8, topk_group 4), and the case's assumptions say so."""
    setup = case_setup(_case(DEEPSEEK_V3), CATALOG)
    assert setup.model.moe is not None and (setup.model.moe.groups, setup.model.moe.group_top_k) == (8, 4)
    assert setup.assumed["moe_groups"] == "8 groups, top 4, from the zoo's deepseek-v3"
    # Fewer nodes per token: the expert all-to-all over 4 nodes (ep 32) is cheaper than plain top-8 routing.
    other = DEEPSEEK_V3 | {"name": "not-in-the-zoo"}
    plain = case_setup(_case(other), CATALOG)
    assert plain.model.moe is not None and plain.model.moe.group_top_k is None and "moe_groups" not in plain.assumed
    routed = predict_training_case(_case(DEEPSEEK_V3), "step_time_s", CATALOG)
    unrouted = predict_training_case(_case(other), "step_time_s", CATALOG)
    assert routed < 0.99 * unrouted


def test_a_case_that_differs_from_the_zoo_entry_it_is_named_after_keeps_plain_routing() -> None:
    for changed in ({"moe": {"experts": 128, "top_k": 8, "shared_experts": 1}}, {"layers": 27}, {"hidden": 2048}):
        setup = case_setup(_case(DEEPSEEK_V3 | changed), CATALOG)
        assert setup.model.moe is not None and setup.model.moe.group_top_k is None, changed
        assert "moe_groups" not in setup.assumed


def test_a_stated_mtp_module_costs_the_last_stage_a_block_a_projection_and_a_second_head() -> None:
    """``model.mtp_layers`` (DeepSeek-V3's multi-token prediction) is priced where a case states it; a case
    named after the zoo's DeepSeek-V3 that states none trains none, and its assumptions say so."""
    stated = case_setup(_case(DEEPSEEK_V3 | {"mtp_layers": 1}), CATALOG)
    assert stated.model.mtp_layers == 1 and "mtp_layers" not in stated.assumed
    unstated = case_setup(_case(DEEPSEEK_V3), CATALOG)
    assert unstated.model.mtp_layers == 0
    assert unstated.assumed["mtp_layers"] == "none priced: the case states none (the zoo's deepseek-v3 trains 1)"
    assert stated.model.num_params() == unstated.model.num_params()  # not in the 671B, as the paper counts
    with_mtp = predict_training_case(_case(DEEPSEEK_V3 | {"mtp_layers": 1}), "step_time_s", CATALOG)
    without = predict_training_case(_case(DEEPSEEK_V3 | {"mtp_layers": 0}), "step_time_s", CATALOG)
    assert without == predict_training_case(_case(DEEPSEEK_V3), "step_time_s", CATALOG)
    # The last stage runs the 7168 x 129280 output GEMM twice per micro-batch (1.85 GFLOP a token each way):
    # a few percent of a 61-layer step, not nothing and not a whole stage.
    assert 1.01 * without < with_mtp < 1.3 * without
    named_otherwise = case_setup(_case(DEEPSEEK_V3 | {"name": "not-in-the-zoo"}), CATALOG)
    assert "mtp_layers" not in named_otherwise.assumed


def test_a_stated_expert_tp_degree_is_read_and_an_impossible_one_refused() -> None:
    """``parallel.etp`` (Megatron-Core's expert_tensor_parallel_size, e.g. DGX Cloud's Grok-1 on H100: TP4 ETP1)."""
    stated = case_setup(_case(DEEPSEEK_V3, tp=2, dp=16, etp=1), CATALOG)
    assert stated.layout.etp == 1
    assert case_setup(_case(DEEPSEEK_V3), CATALOG).layout.etp is None  # null at tp 1: nothing to split
    # null at tp 2: the framework's recipes' degree (Megatron's: whole experts), said per case
    null = case_setup(_case(DEEPSEEK_V3, tp=2, dp=16), CATALOG)
    assert null.layout.etp == 1 and null.assumed["etp"] == 1
    assert case_setup(_case(DEEPSEEK_V3, tp=2, dp=16, etp=2), CATALOG).layout.etp == 2
    with pytest.raises(ClusterSimError, match=r"ep\*etp = 32\*3 must divide"):
        predict_training_case(_case(DEEPSEEK_V3, tp=2, dp=16, etp=3), "step_time_s", CATALOG)


def test_a_stated_token_dispatcher_is_read_and_priced() -> None:
    """``parallel.ep_dispatcher``: Megatron-Core's alltoall dispatcher, or the flex one's DeepEP / HybridEP."""
    null = case_setup(_case(DEEPSEEK_V3), CATALOG)
    assert null.layout.ep_dispatcher is None and null.assumed["ep_dispatcher"] == "deepep"  # megatron's, said so
    for stated, read in (("alltoall", "alltoall"), ("deepep", "deepep"), ("hybridep", "deepep")):
        setup = case_setup(_case(DEEPSEEK_V3, ep_dispatcher=stated), CATALOG)
        assert setup.layout.ep_dispatcher == read and "ep_dispatcher" not in setup.assumed
    # 32 ranks over 4 nodes: every token-expert copy on the network (NCCL) is slower than one copy per node
    nccl = predict_training_case(_case(DEEPSEEK_V3, ep_dispatcher="alltoall"), "step_time_s", CATALOG)
    deepep = predict_training_case(_case(DEEPSEEK_V3, ep_dispatcher="deepep"), "step_time_s", CATALOG)
    assert nccl > 1.05 * deepep
    assert deepep == predict_training_case(_case(DEEPSEEK_V3), "step_time_s", CATALOG)
    with pytest.raises(ClusterSimError, match="ep_dispatcher"):
        case_setup(_case(DEEPSEEK_V3, ep_dispatcher="nvshmem"), CATALOG)


GPT_OSS_120B = {
    "name": "gpt-oss-120b",
    "layers": 36,
    "hidden": 2880,
    "ffn_hidden": 2880,
    "heads": 64,
    "kv_heads": 8,
    "head_dim": 64,
    "vocab": 201088,
    "seq_len": 4096,
    "ffn_type": "swiglu",
    "moe": {"experts": 128, "top_k": 4, "shared_experts": 0},
}


FLAT = {"pp": 1, "dp": 256, "ep": 8, "vp": 1, "global_batch": 256}


def test_a_stated_sliding_window_shortens_the_windowed_layers_attention_and_nothing_else() -> None:
    """``model.sliding_window`` and ``window_layers`` (gpt-oss: 128 keys on 18 of 36 layers, the zoo's entry)."""
    windowed = GPT_OSS_120B | {"sliding_window": 128, "window_layers": 18}
    model = case_setup(_case(windowed, **FLAT), CATALOG).model
    plain = case_setup(_case(GPT_OSS_120B, **FLAT), CATALOG).model
    zoo = load_model("gpt-oss-120b", use_env=False)
    assert (model.sliding_window, model.window_layers) == (zoo.sliding_window, zoo.window_layers) == (128, 18)
    assert (plain.sliding_window, plain.window_layers) == (0, 0)
    # 18 layers' scores and context over 128 keys instead of 4,096 (the model-FLOPs convention counts every key),
    # forward and backward: 18 x 12 x 64 heads x 64 x (4,096 - 128) FLOPs a token fewer, 3.5 GFLOP of the 38
    saved = plain.model_flops_per_token(4096) - model.model_flops_per_token(4096)
    assert saved == pytest.approx(18 * 12 * 64 * 64 * (4096 - 128), rel=1e-9)
    assert model.num_params() == plain.num_params()
    # Eight micro-batches a rank: one alone would leave the step to the experts' gradient reduce-scatter over 32
    # nodes, which the shorter backward pass would only uncover.
    eight = FLAT | {"global_batch": 2048}
    fast = predict_training_case(_case(windowed, **eight), "step_time_s", CATALOG)
    slow = predict_training_case(_case(GPT_OSS_120B, **eight), "step_time_s", CATALOG)
    assert fast < slow
    with pytest.raises(ClusterSimError, match="window_layers 40 exceeds layers 36"):
        case_setup(_case(windowed | {"window_layers": 40}, **FLAT), CATALOG)


def test_a_serving_cases_checkpoint_quantization_is_read_and_a_bad_one_refused_naming_it() -> None:
    """``model.quantization``: InferenceMAX's gpt-oss-120b rows state the release's MXFP4 routed experts."""
    from clustersim.validation.cases import project_dir, read_cases
    from clustersim.validation.inference import case_deployment
    from clustersim.workload.quantization import MXFP4_EXPERTS

    case = next(c for c in read_cases(project_dir() / "inference.jsonl") if c.id.startswith("imax_gpt-oss-120b_h100"))
    model = case_deployment(case, load_catalog(use_env=False)).model
    assert model.quantization == MXFP4_EXPERTS
    bad = case.model_dump(exclude_none=True)
    bad["model"]["quantization"] = {**bad["model"]["quantization"], "group_size": 16}
    with pytest.raises(ClusterSimError, match=r"model.quantization.*mxfp4 stores 4 bits a weight in groups of 32"):
        case_deployment(bad, load_catalog(use_env=False))
