"""Every term of the training step against a hand derivation on a tiny model and a round-number device.

The device: 1 PFLOP/s dense BF16 (2 PFLOP/s FP8), 2 TB/s HBM, 100 GB/s NVLink per direction. The
efficiencies: GEMMs at exactly half the peak (``gemm_half_flop = 0`` removes the size ramp), the attention
core at half of that (no exponential rate recorded: products only), element-wise kernels at half the
HBM bandwidth. So a GEMM runs at 5e14 FLOP/s, the
attention core at 2.5e14 FLOP/s and memory traffic at 1e12 B/s, and every compute term is FLOPs or bytes
divided by a round number.

The model (Llama-style: SwiGLU, RMSNorm, rotary, no biases, untied): 4 layers, h = 1024, f = 4096,
8 query heads and 4 KV heads of 128 (q = 1024, kv = 512), V = 32768; sequences of s = 1024 tokens.

Communication times come from ``clustersim.network`` (tested on its own closed forms) on the fabric the
group really sees, built here by hand; what these tests pin is how many collectives a step runs, of how
many bytes, over which group, and how they overlap.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.compute.efficiency import FamilyEfficiency
from clustersim.compute.software import software_for
from clustersim.errors import ClusterSimError
from clustersim.execution import EpDispatcher, Layout
from clustersim.network.analytic import collective_time_s
from clustersim.network.collectives import Op
from clustersim.network.fabric import Fabric
from clustersim.network.topology import Topology
from clustersim.system import System
from clustersim.training.estimate import TrainingJob, estimate_training
from clustersim.workload.transformer import MoE, Transformer

REL = 1e-9
CATALOG = load_catalog(use_env=False)


def _round_gpu():
    h100 = CATALOG.accelerator("h100-sxm")

    def fig(figure, value):
        return figure.model_copy(update={"value": value})

    dense = dict(h100.dense_flop_per_s)
    dense.update({Dtype.BF16: fig(dense[Dtype.BF16], 1e15), Dtype.FP16: fig(dense[Dtype.FP16], 1e15)})
    dense[Dtype.FP8] = fig(dense[Dtype.FP8], 2e15)
    return h100.model_copy(
        update={
            "id": "round-gpu",
            "dense_flop_per_s": dense,
            "memory_bandwidth_bytes_per_s": fig(h100.memory_bandwidth_bytes_per_s, 2e12),
            "scaleup_bandwidth_per_direction_bytes_per_s": fig(h100.scaleup_bandwidth_per_direction_bytes_per_s, 1e11),
            "tdp_watts": fig(h100.tdp_watts, 1000.0),
            "exp_per_s": None,  # the core's exponentials: tests/compute/test_attention_softmax.py
        }
    )


GPU = _round_gpu()
NVLINK = 1e11
EFF = FamilyEfficiency(
    gemm_max=0.5,
    gemm_half_flop=0.0,
    attention=0.5,
    memory_efficiency=0.5,
    fp8_efficiency_ratio=0.75,
    source="round numbers for hand derivations",
)
# Megatron's profile with fused attention and no TP overlap, whatever the family's defaults.
SW = software_for("megatron", "hopper").model_copy(update={"fused_attention": True, "tp_overlap": False})
GEMM = 0.5e15  # FLOP/s
ATTN = 0.25e15  # FLOP/s
HBM = 1e12  # B/s
H, F, Q, KV, V, L, S = 1024, 4096, 1024, 512, 32768, 4, 1024
TINY = Transformer(name="tiny", layers=L, hidden=H, ffn_hidden=F, heads=8, kv_heads=4, vocab=V, ffn_type="swiglu")
# Parameters: per layer attention h(q + 2kv) + q h = 3,145,728, MLP 3 h f = 12,582,912, two RMSNorms 2h;
# embedding and untied output 2 V h = 67,108,864; the final norm h.
LAYER_PARAMS = 3_145_728 + 12_582_912 + 2 * 1024
PARAMS = 4 * LAYER_PARAMS + 67_108_864 + 1024  # 130,032,640


def system(
    num_devices: int, devices_per_node: int, network_bytes_per_s: float = 50e9, nvlink: float = NVLINK, gpu=None
):
    topology = Topology(
        name="round",
        num_devices=num_devices,
        devices_per_node=devices_per_node,
        scaleup_bytes_per_s=nvlink,
        network_bytes_per_s=network_bytes_per_s,
        in_network_reduction=False,
    )
    return System(name="round", accelerator=gpu or GPU, cores_per_device=1, topology=topology)


def estimate(layout: Layout, *, devices: int, per_node: int | None = None, global_batch: int = 2, **kw):
    network = kw.pop("network", 50e9)
    nvlink = kw.pop("nvlink", NVLINK)
    gpu = kw.pop("gpu", None)
    model = kw.pop("model", TINY)
    eff = kw.pop("eff", EFF)
    sw = kw.pop("sw", SW)
    job = TrainingJob(global_batch=global_batch, seq_len=S, **kw)
    hardware = system(devices, per_node or devices, network, nvlink, gpu)
    return estimate_training(model, hardware, layout, job, efficiency=eff, software=sw)


def terms(est) -> dict[str, tuple[float, float]]:
    return {t.name: (t.link_s, t.exposed_s) for t in est.terms}


def node_fabric(ranks: int) -> Fabric:
    """``ranks`` devices of one node on NVLink (the group fabric of a group inside a node)."""
    return Fabric("hand", ranks, 1, NVLINK, 50e9, False)


def t_coll(op: Op, size: float, fabric: Fabric) -> float:
    return float(collective_time_s(op, size, fabric)[0])


def layer_parts(tokens: float, tp: float = 1, sp: float = 1, *, gemm=GEMM) -> tuple[float, float, float]:
    """Forward seconds of one layer's (GEMMs, attention core, element-wise traffic) on one device."""
    qkv = 2 * tokens * H * (Q + 2 * KV) / tp  # the QKV projection
    proj = 2 * tokens * Q * H / tp  # attention output projection
    mlp = 3 * 2 * tokens * H * F / tp  # gate, up and down
    core = 4 * tokens * S * Q / tp * 0.5  # QK^T and PV over the full sequence, half of it causal (fused)
    norms = 2 * 11 * tokens * H / sp  # 11 16-bit elements per token and h: two norms, two residual adds
    bias_act = 2 * tokens * (2 * (Q + 2 * KV) + 4 * F) / tp  # rotary / QKV I/O and SwiGLU I/O
    return (qkv + proj + mlp) / gemm, core / ATTN, (norms + bias_act) / HBM


def head_parts(tokens: float, tp: float = 1, *, gemm=GEMM) -> tuple[float, float]:
    """(forward, backward) seconds of the output head: logits GEMM and the FP32 softmax cross-entropy."""
    logits = 2 * tokens * V * H / tp / gemm
    loss = 14 / 3 * tokens * V / tp / HBM
    return logits + loss, 2 * logits + 2 * loss


def test_the_hand_numbers_of_one_layer():
    """The per-layer figures the other tests build on, written out once (T = 1024 tokens)."""
    gemm, core, memory = layer_parts(1024)
    # GEMMs 2*1024*1024*(2048 + 1024 + 12288) = 32.21e9 FLOP at 5e14: 64.42 us.
    assert gemm == pytest.approx(64.42450944e-6, rel=REL)
    # Attention core 4*1024*1024*1024/2 = 2.147e9 FLOP at 2.5e14: 8.59 us.
    assert core == pytest.approx(8.589934592e-6, rel=REL)
    # Element-wise 23,068,672 + 41,943,040 bytes at 1e12: 65.01 us.
    assert memory == pytest.approx(65.011712e-6, rel=REL)
    fwd, bwd = head_parts(1024)
    assert fwd == pytest.approx(137.438953472e-6 + 156.587349333e-6, rel=1e-9)
    assert bwd == pytest.approx(2 * fwd, rel=REL)
    assert TINY.num_params() == PARAMS


# ---- compute: forward, backward, recompute ------------------------------------------------------------------


def test_one_device_forward_backward_and_optimizer():
    est = estimate(Layout(), devices=1)  # 2 micro-batches of 1 sequence
    gemm, core, memory = layer_parts(1024)
    head_fwd, head_bwd = head_parts(1024)
    forward = 2 * (4 * (gemm + core + memory) + head_fwd)
    # backward: GEMMs x2, the fused attention core x2.5 (it recomputes the scores), element-wise x1.5
    backward = 2 * (4 * (2 * gemm + 2.5 * core + 1.5 * memory) + head_bwd)
    optimizer = PARAMS * 30 / HBM  # Adam: 30 bytes of traffic per parameter
    t = terms(est)
    assert t["forward"] == pytest.approx((forward, forward), rel=REL)
    assert t["backward"] == pytest.approx((backward, backward), rel=REL)
    assert t["optimizer"] == pytest.approx((optimizer, optimizer), rel=REL)
    for name in ("recompute", "pipeline bubble", "tp comm", "cp comm", "ep comm", "pp comm", "dp comm"):
        assert t[name] == (0.0, 0.0), name
    assert est.step_s == pytest.approx(forward + backward + optimizer, rel=REL)


def test_one_micro_batch_and_the_per_operation_times():
    est = estimate(Layout(), devices=1, global_batch=1)
    gemm, core, memory = layer_parts(1024)
    head_fwd, _ = head_parts(1024)
    assert terms(est)["forward"][1] == pytest.approx(4 * (gemm + core + memory) + head_fwd, rel=REL)
    ops = {(op.name, op.scope): (op.forward_s, op.backward_s) for op in est.operations}
    assert set(ops) == {
        ("qkv", "layer"),
        ("attention core", "layer"),
        ("output projection", "layer"),
        ("mlp", "layer"),
        ("norms and residuals", "layer"),
        ("bias and activation", "layer"),
        ("logits", "head (last stage)"),
        ("loss", "head (last stage)"),
    }
    qkv = 2 * 1024 * H * (Q + 2 * KV) / GEMM
    assert ops[("qkv", "layer")] == pytest.approx((qkv, 2 * qkv), rel=REL)
    assert ops[("attention core", "layer")] == pytest.approx((core, 2.5 * core), rel=REL)
    norms = 2 * 11 * 1024 * H / HBM
    assert ops[("norms and residuals", "layer")] == pytest.approx((norms, 1.5 * norms), rel=REL)
    logits = 2 * 1024 * V * H / GEMM
    assert ops[("logits", "head (last stage)")] == pytest.approx((logits, 2 * logits), rel=REL)


def test_mfu_and_hfu_follow_their_definitions():
    est = estimate(Layout(recompute="full"), devices=1)
    # Model FLOPs per token: 3 x (2 x matmul weights + attention 4 s q per layer).
    matmul_weights = 4 * (3_145_728 + 12_582_912) + V * H  # 96,468,992
    forward_per_token = 2 * matmul_weights + 4 * 4 * S * Q
    model_flops = 3 * forward_per_token * 2 * S  # 2 sequences of 1024 tokens
    assert est.model_flops_per_step == pytest.approx(model_flops, rel=REL)
    # Full recompute repeats the forward of the layers (not the logits) once more.
    hardware_flops = model_flops + (forward_per_token - 2 * V * H) * 2 * S
    assert est.hardware_flops_per_step == pytest.approx(hardware_flops, rel=REL)
    assert est.mfu == pytest.approx(model_flops / (est.step_s * 1 * 1e15), rel=REL)
    assert est.hfu == pytest.approx(hardware_flops / (est.step_s * 1 * 1e15), rel=REL)
    assert est.tokens_per_s_per_device == pytest.approx(2 * S / est.step_s, rel=REL)
    selective = estimate(Layout(recompute="selective"), devices=1)
    assert selective.hardware_flops_per_step == pytest.approx(model_flops + 4 * 4 * S * Q * 2 * S, rel=REL)


def test_mfu_counts_every_device_and_the_precision_peak():
    est = estimate(Layout(dp=2), devices=2, global_batch=4, precision=Dtype.FP8)
    model_flops = 3 * (2 * 96_468_992 + 4 * 4 * S * Q) * 4 * S
    assert est.mfu == pytest.approx(model_flops / (est.step_s * 2 * 2e15), rel=REL)


def test_full_recompute_repeats_the_layer_forward_but_not_the_head():
    est = estimate(Layout(recompute="full"), devices=1)
    gemm, core, memory = layer_parts(1024)
    recompute = 2 * 4 * (gemm + core + memory)
    assert terms(est)["recompute"] == pytest.approx((recompute, recompute), rel=REL)


def test_selective_recompute_repeats_the_attention_core_only():
    est = estimate(Layout(recompute="selective"), devices=1)
    _, core, _ = layer_parts(1024)
    assert terms(est)["recompute"][1] == pytest.approx(2 * 4 * core, rel=REL)


def test_fp8_runs_gemms_at_the_fp8_peak_and_attention_and_the_logits_at_the_16_bit_one():
    est = estimate(Layout(), devices=1, precision=Dtype.FP8)
    fp8_gemm = 2e15 * 0.5 * 0.75  # FP8 peak x gemm_max x fp8_efficiency_ratio
    gemm, core, memory = layer_parts(1024, gemm=fp8_gemm)
    head_fwd, _ = head_parts(1024)  # the logits GEMM outside the FP8 layers: BF16
    forward = 2 * (4 * (gemm + core + memory) + head_fwd)
    assert terms(est)["forward"][1] == pytest.approx(forward, rel=REL)
    quantized = estimate(Layout(), devices=1, precision=Dtype.FP8, sw=SW.model_copy(update={"quantized_head": True}))
    head_fp8, _ = head_parts(1024, gemm=fp8_gemm)
    assert terms(quantized)["forward"][1] == pytest.approx(2 * (4 * (gemm + core + memory) + head_fp8), rel=REL)


def test_fp16_reads_the_fp16_peak():
    # A chip whose FP16 peak (0.5 PFLOP/s) differs from its BF16 one: FP16 GEMMs and attention run on it.
    dense = dict(GPU.dense_flop_per_s)
    dense[Dtype.FP16] = dense[Dtype.FP16].model_copy(update={"value": 0.5e15})
    gpu = GPU.model_copy(update={"dense_flop_per_s": dense})
    fp16 = estimate(Layout(), devices=1, precision=Dtype.FP16, gpu=gpu)
    bf16 = estimate(Layout(), devices=1, precision=Dtype.BF16, gpu=gpu)
    _, _, memory = layer_parts(1024)
    gemm_s = (2 * 1024 * H * (Q + 2 * KV) + 2 * 1024 * Q * H + 6 * 1024 * H * F) / (0.5e15 * 0.5)
    core_s = 4 * 1024 * S * Q * 0.5 / (0.5e15 * 0.5 * 0.5)
    head_s = 2 * 1024 * V * H / (0.5e15 * 0.5) + 14 / 3 * 1024 * V / HBM
    assert terms(fp16)["forward"][1] == pytest.approx(2 * (4 * (gemm_s + core_s + memory) + head_s), rel=REL)
    gemm, core, _ = layer_parts(1024)
    head_fwd, _ = head_parts(1024)
    assert terms(bf16)["forward"][1] == pytest.approx(2 * (4 * (gemm + core + memory) + head_fwd), rel=REL)
    assert fp16.mfu == pytest.approx(fp16.model_flops_per_step / (fp16.step_s * 0.5e15), rel=REL)


def test_unfused_attention_runs_the_full_core_and_streams_the_scores():
    unfused = SW.model_copy(update={"fused_attention": False})
    est = estimate(Layout(), devices=1, sw=unfused)
    gemm, core, memory = layer_parts(1024)
    full_core = 2 * core  # no causal skipping
    scores = 13 * 1024 * S * 8 / HBM  # 13 bytes per score element, 8 heads, forward
    layer_fwd = gemm + full_core + memory + scores
    layer_bwd = 2 * gemm + 2 * full_core + 1.5 * memory + 15 / 13 * scores
    head_fwd, head_bwd = head_parts(1024)
    assert terms(est)["forward"][1] == pytest.approx(2 * (4 * layer_fwd + head_fwd), rel=REL)
    assert terms(est)["backward"][1] == pytest.approx(2 * (4 * layer_bwd + head_bwd), rel=REL)


def test_small_gemms_lose_efficiency_at_the_half_flop_size():
    # gemm_half_flop equal to the logits GEMM (2 * 1024 * 32768 * 1024 FLOPs): it runs at half of gemm_max.
    half = 2.0 * 1024 * V * H
    est = estimate(Layout(), devices=1, eff=EFF.model_copy(update={"gemm_half_flop": half}))
    qkv, proj, each_mlp = 2 * 1024 * H * 2048, 2 * 1024 * Q * H, 2 * 1024 * H * F

    def seconds(flop):  # fraction gemm_max * F / (F + F_half)
        return flop / (1e15 * 0.5 * flop / (flop + half))

    gemm = seconds(qkv) + seconds(proj) + 3 * each_mlp / (1e15 * 0.5 * each_mlp / (each_mlp + half))
    _, core, memory = layer_parts(1024)
    logits = seconds(half)
    assert logits == pytest.approx(2 * half / GEMM, rel=REL)
    head_fwd = logits + 14 / 3 * 1024 * V / HBM
    assert terms(est)["forward"][1] == pytest.approx(2 * (4 * (gemm + core + memory) + head_fwd), rel=REL)


# ---- tensor parallelism ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sp", "recompute", "count"),
    [(False, "none", 4), (True, "none", 5), (False, "full", 6), (True, "full", 7), (True, "selective", 5)],
)
def test_tp_runs_four_all_reduces_per_layer_plus_two_with_full_recompute_plus_one_with_sp(sp, recompute, count):
    est = estimate(Layout(tp=2, sequence_parallel=sp, recompute=recompute, tp_overlap=False), devices=2)
    all_reduce = t_coll(Op.ALL_REDUCE, 1024 * H * 2, node_fabric(2))  # T h 16-bit activations
    link = 2 * 4 * count * all_reduce  # 2 micro-batches x 4 layers
    assert terms(est)["tp comm"] == pytest.approx((link, link), rel=REL)


def test_tp_splits_gemms_and_sequence_parallelism_splits_the_norms():
    plain = estimate(Layout(tp=2), devices=2)
    sp = estimate(Layout(tp=2, sequence_parallel=True), devices=2)
    head_fwd, _ = head_parts(1024, tp=2)
    for est, split in ((plain, 1), (sp, 2)):
        gemm, core, memory = layer_parts(1024, tp=2, sp=split)
        assert terms(est)["forward"][1] == pytest.approx(2 * (4 * (gemm + core + memory) + head_fwd), rel=REL)


def test_tp_overlap_hides_communication_behind_the_gemms():
    # A slow NVLink (1 GB/s) so that the all-reduces outlast the GEMMs they overlap with.
    all_reduce = t_coll(Op.ALL_REDUCE, 1024 * H * 2, Fabric("hand", 2, 1, 1e9, 50e9, False))
    gemm, _, _ = layer_parts(1024, tp=2)
    for recompute, count, passes in (("none", 4, 3), ("full", 6, 4)):
        est = estimate(Layout(tp=2, tp_overlap=True, recompute=recompute), devices=2, nvlink=1e9)
        link = 4 * count * all_reduce  # per micro-batch
        # Overlapped with the layer GEMMs of the forward and the two backward GEMMs (and the recomputed forward).
        exposed = link - 4 * passes * gemm
        assert exposed > 0
        assert terms(est)["tp comm"] == pytest.approx((2 * link, 2 * exposed), rel=REL)


def test_tp_overlap_on_fast_links_hides_everything():
    est = estimate(Layout(tp=2, tp_overlap=True), devices=2, nvlink=1e13)
    link, exposed = terms(est)["tp comm"]
    assert link > 0 and exposed == 0.0


def test_tp_overlap_default_comes_from_the_family():
    on = estimate(Layout(tp=2), devices=2, nvlink=1e13, sw=SW.model_copy(update={"tp_overlap": True}))
    off = estimate(Layout(tp=2), devices=2, nvlink=1e13)
    assert terms(on)["tp comm"][1] == 0.0
    assert terms(off)["tp comm"][1] == terms(off)["tp comm"][0] > 0


# ---- pipeline --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("vp", [1, 2])
def test_pipeline_bubble_and_sends(vp):
    # pp 2: 2 layers per stage (vp 2: two chunks of one layer); 4 micro-batches.
    est = estimate(Layout(pp=2, vp=vp), devices=2, global_batch=4)
    gemm, core, memory = layer_parts(1024)
    head_fwd, head_bwd = head_parts(1024)
    fwd_mb = 2 * (gemm + core + memory) + head_fwd  # the last stage: its layers and the head
    bwd_mb = 2 * (2 * gemm + 2.5 * core + 1.5 * memory) + head_bwd
    # Megatron sends T h / tp 16-bit activations, forward and backward, once per model chunk.
    send = t_coll(Op.SENDRECV, 1024 * H * 2, node_fabric(2))
    pp_mb = 2 * vp * send
    t = terms(est)
    assert t["forward"][1] == pytest.approx(4 * fwd_mb, rel=REL)
    assert t["pp comm"] == pytest.approx((4 * pp_mb, 4 * pp_mb), rel=REL)
    # The bubble waits on the stages before the last one, which hold no head.
    bubble = (2 - 1) / vp * (fwd_mb + bwd_mb - head_fwd - head_bwd + pp_mb)
    assert t["pipeline bubble"] == pytest.approx((bubble, bubble), rel=REL)
    assert est.step_s == pytest.approx(4 * (fwd_mb + bwd_mb + pp_mb) + bubble + PP_OPTIMIZER, rel=REL)


@pytest.mark.parametrize(("layers", "last", "on_last"), [(4, 1, True), (8, 1, False), (8, 3, True)])
def test_a_stated_last_stage_sets_the_pace_with_the_head_or_leaves_it_to_the_other(layers, last, on_last):
    """pp 2 with the last rank's layers stated; the head costs about 2.3 layers here."""
    model = TINY.model_copy(update={"layers": layers})
    est = estimate(Layout(pp=2, last_stage_layers=last, uneven_stages=True), devices=2, global_batch=4, model=model)
    gemm, core, memory = layer_parts(1024)
    head_fwd, head_bwd = head_parts(1024)
    layer_fwd, layer_bwd = gemm + core + memory, 2 * gemm + 2.5 * core + 1.5 * memory
    other = layers - last
    assert on_last == (last * (layer_fwd + layer_bwd) + head_fwd + head_bwd >= other * (layer_fwd + layer_bwd))
    slow = last if on_last else other
    t = terms(est)
    assert t["forward"][1] == pytest.approx(4 * (slow * layer_fwd + on_last * head_fwd), rel=REL)
    assert t["backward"][1] == pytest.approx(4 * (slow * layer_bwd + on_last * head_bwd), rel=REL)
    # The fill and drain keep the pace of the rank before the last: its layers, no head.
    pp_mb = 2 * t_coll(Op.SENDRECV, 1024 * H * 2, node_fabric(2))
    assert t["pipeline bubble"][1] == pytest.approx(other * (layer_fwd + layer_bwd) + pp_mb, rel=REL)


# The last stage holds 2 layers, the output matrix and the final norm (the first stage: the embedding).
PP_OPTIMIZER = (2 * LAYER_PARAMS + V * H + 1024) * 30 / HBM


def test_pp_sends_split_over_tp_ranks_and_cross_nodes_on_the_network_share():
    # tp 2 inside nodes of 2 devices, pp 2 across the 2 nodes: each TP rank sends T h / 2 over its share
    # of the node's network (1 of 2 devices: 25 GB/s).
    est = estimate(Layout(tp=2, pp=2), devices=4, per_node=2, global_batch=4)
    send = t_coll(Op.SENDRECV, 1024 * H * 2 / 2, Fabric("hand", 1, 2, NVLINK, 25e9, False))
    assert terms(est)["pp comm"][1] == pytest.approx(4 * 2 * send, rel=REL)


def test_the_bubble_counts_the_exposed_communication_of_the_slowest_stage():
    est = estimate(Layout(tp=2, pp=2, tp_overlap=False), devices=4, global_batch=4)
    gemm, core, memory = layer_parts(1024, tp=2)
    head_fwd, head_bwd = head_parts(1024, tp=2)
    tp_mb = 2 * 4 * t_coll(Op.ALL_REDUCE, 1024 * H * 2, node_fabric(2))  # 2 layers x 4 all-reduces
    # pp group: ranks 2 apart on a 4-device node, 2 members in the node
    pp_mb = 2 * t_coll(Op.SENDRECV, 1024 * H * 2 / 2, node_fabric(2))
    per_mb = 2 * (gemm + core + memory) + 2 * (2 * gemm + 2.5 * core + 1.5 * memory)  # a stage without the head
    assert terms(est)["pipeline bubble"][1] == pytest.approx(per_mb + tp_mb + pp_mb, rel=REL)
    assert head_fwd + head_bwd > 0.01 * per_mb  # the head would show if the bubble counted it


# ---- context parallelism ------------------------------------------------------------------------------------


def test_cp_gathers_keys_and_values_three_times_per_layer_behind_the_attention_core():
    est = estimate(Layout(cp=2), devices=2)
    tokens = 1024 / 2  # each CP rank holds half the sequence
    gather = t_coll(Op.ALL_GATHER, 2 * tokens * 2 * KV * 2, node_fabric(2))  # K and V of both ranks, 16-bit
    link = 2 * 4 * 3 * gather  # 2 micro-batches x 4 layers x (forward + 2 backward)
    _, core, _ = layer_parts(tokens)
    exposed = max(link - 2 * 4 * 3.5 * core, 0.0)  # behind the core's forward and backward (2.5x)
    assert terms(est)["cp comm"] == pytest.approx((link, exposed), rel=REL, abs=1e-15)
    # Gradients are reduced over the cp ranks too.
    assert terms(est)["dp comm"][0] == pytest.approx(t_coll(Op.ALL_REDUCE, PARAMS * 2, node_fabric(2)), rel=REL)


def test_cp_exchange_shows_when_the_attention_core_is_too_short():
    est = estimate(Layout(cp=2), devices=2, nvlink=1e9)
    gather = t_coll(Op.ALL_GATHER, 2 * 512 * 2 * KV * 2, Fabric("hand", 2, 1, 1e9, 50e9, False))
    _, core, _ = layer_parts(512)
    link, exposed = 2 * 4 * 3 * gather, 2 * 4 * (3 * gather - 3.5 * core)
    assert exposed > 0
    assert terms(est)["cp comm"] == pytest.approx((link, exposed), rel=REL)


def test_the_attention_core_slows_as_each_query_meets_fewer_keys_in_one_kernel_call():
    """At ``attention_half_keys`` keys per query and call the core runs at half its fraction; a CP ring
    splits each query's keys over its ranks' calls (S = 1024, causal: 512 keys per query)."""
    curve = EFF.model_copy(update={"attention_half_keys": 512.0})
    _, core, _ = layer_parts(1024)
    whole = {op.name: op.forward_s for op in estimate(Layout(), devices=1, eff=curve).operations}
    assert whole["attention core"] == pytest.approx(core * (512 + 512) / 512, rel=REL)
    _, core_cp, _ = layer_parts(512)  # each CP rank's queries: half the FLOPs, 256 keys per call
    ring = {op.name: op.forward_s for op in estimate(Layout(cp=2), devices=2, eff=curve).operations}
    assert ring["attention core"] == pytest.approx(core_cp * (256 + 512) / 256, rel=REL)


def test_a_power_capped_device_computes_at_the_clock_its_board_power_allows():
    """At an eighth of its 1,000 W TDP the round GPU's compute clock is (1/8)^(1/3) = 1/2: GEMMs and the
    attention core take twice as long, memory traffic does not."""
    capped = dataclasses.replace(system(1, 1, 50e9, NVLINK, None), board_power_watts=125.0)
    assert capped.compute_clock_ratio == pytest.approx(0.5, rel=REL)
    job = TrainingJob(global_batch=2, seq_len=S)
    ops = {
        o.name: o.forward_s
        for o in estimate_training(TINY, capped, Layout(), job, efficiency=EFF, software=SW).operations
    }
    _, core, _ = layer_parts(1024)
    assert ops["attention core"] == pytest.approx(2 * core, rel=REL)
    assert ops["qkv"] == pytest.approx(2 * 2 * 1024 * H * (Q + 2 * KV) / GEMM, rel=REL)
    assert ops["norms and residuals"] == pytest.approx(2 * 11 * 1024 * H / HBM, rel=REL)  # HBM-bound: unchanged


def test_a_frameworks_attention_kernel_scales_the_core_only():
    slower = SW.model_copy(update={"attention_kernel_efficiency": 0.5})
    _, core, _ = layer_parts(1024)
    ops = {op.name: op.forward_s for op in estimate(Layout(), devices=1, sw=slower).operations}
    assert ops["attention core"] == pytest.approx(2 * core, rel=REL)
    assert ops["qkv"] == pytest.approx(2 * 1024 * H * (Q + 2 * KV) / GEMM, rel=REL)


# ---- expert parallelism -----------------------------------------------------------------------------------

MOE = Transformer(
    name="tiny-moe",
    layers=L,
    hidden=H,
    ffn_hidden=F,
    heads=8,
    kv_heads=4,
    vocab=V,
    ffn_type="swiglu",
    moe=MoE(experts=4, top_k=2),
)


def test_ep_runs_four_all_to_alls_per_layer_of_the_routed_tokens():
    plain = SW.model_copy(update={"ep_dispatch_per_node": False})  # NCCL's all-to-all: one copy per routed expert
    est = estimate(Layout(dp=2, ep=2), devices=2, global_batch=4, model=MOE, sw=plain)
    # dispatch and combine, forward and backward: T x top_k x h 16-bit values each
    alltoall = t_coll(Op.ALLTOALL, 1024 * 2 * H * 2, node_fabric(2))
    link = 2 * 4 * 4 * alltoall  # 2 micro-batches x 4 layers x 4
    assert terms(est)["ep comm"] == pytest.approx((link, link), rel=REL)


def test_a_per_gpu_dispatch_sends_a_token_once_to_each_gpu_holding_its_experts():
    assert SW.ep_dispatch_per_node  # Megatron-Core with DeepEP
    est = estimate(Layout(dp=2, ep=2), devices=2, global_batch=4, model=MOE)
    # 2 of 4 experts, 2 a GPU: a GPU misses both with probability C(2, 2) / C(4, 2) = 1/6, so a token reaches
    # 2 x 5/6 GPUs: 5/6 of the 2 copies an all-to-all of every routed copy sends.
    alltoall = t_coll(Op.ALLTOALL, 1024 * 2 * H * 2 * 5 / 6, node_fabric(2))
    link = 2 * 4 * 4 * alltoall
    assert terms(est)["ep comm"] == pytest.approx((link, link), rel=REL)


def test_a_recomputed_moe_layer_dispatches_and_combines_again_exposed():
    plain = SW.model_copy(update={"ep_dispatch_per_node": False})
    alltoall = t_coll(Op.ALLTOALL, 1024 * 2 * H * 2, node_fabric(2))
    once = 2 * 4 * 2 * alltoall  # 2 micro-batches x 4 layers x (dispatch + combine)
    for layout in (
        Layout(dp=2, ep=2, recompute="full"),
        Layout(dp=2, ep=2, recompute="selective", recompute_modules=("moe",)),
    ):
        est = estimate(layout, devices=2, global_batch=4, model=MOE, sw=plain)
        assert terms(est)["ep comm"] == pytest.approx((3 * once, 3 * once), rel=REL)
    for modules in (("moe_act",), ("core_attn", "layernorm")):
        layout = Layout(dp=2, ep=2, recompute="selective", recompute_modules=modules)
        est = estimate(layout, devices=2, global_batch=4, model=MOE, sw=plain)
        assert terms(est)["ep comm"] == pytest.approx((2 * once, 2 * once), rel=REL)


def test_fp8_training_dispatches_fp8_tokens_and_combines_in_16_bits():
    fp8 = SW.model_copy(update={"ep_dispatch_bytes_fp8": 1.0, "ep_dispatch_per_node": False})
    est = estimate(Layout(dp=2, ep=2), devices=2, global_batch=4, model=MOE, precision=Dtype.FP8, sw=fp8)
    dispatch = t_coll(Op.ALLTOALL, 1024 * 2 * H * 1, node_fabric(2))
    combine = t_coll(Op.ALLTOALL, 1024 * 2 * H * 2, node_fabric(2))
    link = 2 * 4 * 2 * (dispatch + combine)  # 2 micro-batches x 4 layers x (forward and backward)
    assert terms(est)["ep comm"] == pytest.approx((link, link), rel=REL)


def test_an_overlapped_all_to_all_hides_behind_one_block_of_the_other_pass():
    """Combined 1F1B: the forward dispatch behind the MLP's backward, the forward combine behind the
    attention's backward, the backward's combine and dispatch behind the attention's and the MLP's
    forward; what a block cannot cover stays exposed, of what it could the schedule hides its
    efficiency, and the hidden time pays the SM share."""
    share, efficiency = SW.ep_overlap_sm_share, SW.ep_overlap_efficiency
    assert 0 < share < 1 and 0 < efficiency <= 1
    for nvlink in (NVLINK, 1e9):  # each all-to-all shorter than its block; then longer
        on = estimate(Layout(dp=2, ep=2, ep_overlap=True), devices=2, global_batch=4, model=MOE, nvlink=nvlink)
        alltoall = t_coll(Op.ALLTOALL, 1024 * 2 * H * 2 * 5 / 6, Fabric("hand", 2, 1, nvlink, 50e9, False))  # per GPU
        ops = {op.name: (op.forward_s, op.backward_s) for op in on.operations if op.scope == "layer"}
        attention = [sum(ops[n][i] for n in ("qkv", "attention core", "output projection")) for i in (0, 1)]
        mlp = [sum(times[i] for times in ops.values()) - attention[i] for i in (0, 1)]
        coverable = 2 * 4 * sum(min(alltoall, block) for block in (*attention, *mlp))  # 2 micro-batches x 4 layers
        hidden = efficiency * coverable
        link = 2 * 4 * 4 * alltoall
        assert terms(on)["ep comm"] == pytest.approx((link, link - (1 - share) * hidden), rel=REL)
    # The layout's setting wins over the framework's.
    off = estimate(
        Layout(dp=2, ep=2, ep_overlap=False),
        devices=2,
        global_batch=4,
        model=MOE,
        sw=SW.model_copy(update={"ep_overlap": True}),
    )
    assert terms(off)["ep comm"][1] == pytest.approx(terms(off)["ep comm"][0], rel=REL)


def test_moe_layer_computes_top_k_experts_and_the_router():
    est = estimate(Layout(dp=2, ep=2), devices=2, global_batch=4, model=MOE)
    gemm, core, _ = layer_parts(1024)
    mlp = 3 * 2 * 1024 * H * F / GEMM
    router = 2 * 1024 * H * 4 / GEMM  # 4 experts' logits
    gemm_moe = gemm - mlp + 2 * mlp + router  # two experts per token
    memory = (2 * 11 * 1024 * H + 2 * 1024 * (2 * (Q + 2 * KV) + 4 * F * 2)) / HBM  # SwiGLU I/O of 2 experts
    # the flex dispatcher (Megatron's default, DeepEP) moves each routed pair's 16-bit row twice (read and write);
    # Megatron-Core's alltoall dispatcher four times
    permutation = 2 * 2 * 2 * (1024 * 2) * H / HBM
    head_fwd, _ = head_parts(1024)
    expected = 2 * (4 * (gemm_moe + core + memory + permutation) + head_fwd)
    assert terms(est)["forward"][1] == pytest.approx(expected, rel=REL)
    alltoall = estimate(Layout(dp=2, ep=2, ep_dispatcher=EpDispatcher.ALLTOALL), devices=2, global_batch=4, model=MOE)
    assert terms(alltoall)["forward"][1] == pytest.approx(expected + 2 * 4 * permutation, rel=REL)
    # Each device holds half the routed experts (2 of 4 MLPs) and the router, attention and norms of every layer:
    # those are all-reduced over the two ranks; its experts, which no other rank holds, are not.
    dense = 4 * (3_145_728 + H * 4 + 2 * H) + 2 * V * H + H
    dp = t_coll(Op.ALL_REDUCE, dense * 2, node_fabric(2))
    assert terms(est)["dp comm"][0] == pytest.approx(dp, rel=REL)
    # Four ranks of two experts each: the experts' gradients are all-reduced over the pair holding the same ones,
    # two ranks apart, after the rest over all four.
    four = estimate(Layout(dp=4, ep=2), devices=4, global_batch=8, model=MOE)
    experts = 4 * 2 * 12_582_912
    dp4 = t_coll(Op.ALL_REDUCE, dense * 2, node_fabric(4)) + t_coll(Op.ALL_REDUCE, experts * 2, node_fabric(2))
    assert terms(four)["dp comm"][0] == pytest.approx(dp4, rel=REL)


def test_a_dense_model_has_no_expert_traffic():
    assert terms(estimate(Layout(dp=2), devices=2, global_batch=4))["ep comm"] == (0.0, 0.0)


# ---- data parallelism, ZeRO and the optimizer ----------------------------------------------------------------
# Two nodes of one device on a slow network (1 GB/s): the gradient traffic outlasts the compute it hides behind.


def dp_case(zero: int, *, overlap: bool = True, precision: Dtype = Dtype.BF16):
    layout = Layout(dp=2, zero=zero, dp_overlap=overlap)
    return estimate(layout, devices=2, per_node=1, global_batch=4, network=1e9, precision=precision)


NET = Fabric("hand", 1, 2, NVLINK, 1e9, False)


def _mb_times():
    gemm, core, memory = layer_parts(1024)
    head_fwd, head_bwd = head_parts(1024)
    return 4 * (gemm + core + memory) + head_fwd, 4 * (2 * gemm + 2.5 * core + 1.5 * memory) + head_bwd


def test_dp_all_reduces_gradients_without_zero():
    est = dp_case(0)
    all_reduce = t_coll(Op.ALL_REDUCE, PARAMS * 2, NET)  # BF16 gradients
    _, bwd_mb = _mb_times()
    assert terms(est)["dp comm"] == pytest.approx((all_reduce, all_reduce - bwd_mb), rel=REL)
    assert terms(est)["optimizer"][1] == pytest.approx(PARAMS * 30 / HBM, rel=REL)  # no sharding
    assert terms(dp_case(0, overlap=False))["dp comm"] == pytest.approx((all_reduce, all_reduce), rel=REL)


@pytest.mark.parametrize("zero", [1, 2])
def test_zero_1_and_2_reduce_scatter_gradients_and_all_gather_parameters(zero):
    est = dp_case(zero)
    scatter = t_coll(Op.REDUCE_SCATTER, PARAMS * 2, NET)
    gather = t_coll(Op.ALL_GATHER, PARAMS * 2, NET)
    fwd_mb, bwd_mb = _mb_times()
    assert terms(est)["dp comm"] == pytest.approx((scatter + gather, scatter - bwd_mb + gather - fwd_mb), rel=REL)
    assert terms(est)["optimizer"][1] == pytest.approx(PARAMS / 2 * 30 / HBM, rel=REL)  # its half of the state


def dp_case_sw(zero: int, sw, *, overlap: bool = True):
    layout = Layout(dp=2, zero=zero, dp_overlap=overlap)
    return estimate(layout, devices=2, per_node=1, global_batch=4, network=1e9, sw=sw)


def test_zero_3_gathers_each_layer_forward_and_backward_for_every_micro_batch():
    # 4 layers of PARAMS / 4 each (embeddings spread over them); one collective per layer (a flat
    # parameter); prefetch: the first gather and the last reduce-scatter are exposed, then each layer
    # exposes what its collectives take beyond its compute.
    est = dp_case(3)
    gather = t_coll(Op.ALL_GATHER, PARAMS / 4 * 2, NET)
    scatter = t_coll(Op.REDUCE_SCATTER, PARAMS / 4 * 2, NET)
    fwd_mb, bwd_mb = _mb_times()
    m = 2  # micro-batches: 4 sequences over dp 2
    link = m * 4 * (2 * gather + scatter)
    per_mb = gather + 3 * max(gather - fwd_mb / 4, 0) + scatter + 3 * max(gather + scatter - bwd_mb / 4, 0)
    assert gather > fwd_mb / 4  # the slow network: the case this checks
    assert terms(est)["dp comm"] == pytest.approx((link, m * per_mb), rel=REL)
    assert terms(dp_case(3, overlap=False))["dp comm"] == pytest.approx((link, link), rel=REL)


def test_zero_3_without_prefetch_exposes_every_collective():
    est = dp_case_sw(3, SW.model_copy(update={"zero3_prefetch": False}))
    gather = t_coll(Op.ALL_GATHER, PARAMS / 4 * 2, NET)
    scatter = t_coll(Op.REDUCE_SCATTER, PARAMS / 4 * 2, NET)
    link = 2 * 4 * (2 * gather + scatter)
    assert terms(est)["dp comm"] == pytest.approx((link, link), rel=REL)


def test_zero_3_per_tensor_collectives_pay_their_latency_each_time():
    est = dp_case_sw(3, SW.model_copy(update={"zero3_collectives_per_layer": 12, "zero3_prefetch": False}))
    gather = 12 * t_coll(Op.ALL_GATHER, PARAMS / 4 / 12 * 2, NET)
    scatter = 12 * t_coll(Op.REDUCE_SCATTER, PARAMS / 4 / 12 * 2, NET)
    assert terms(est)["dp comm"][0] == pytest.approx(2 * 4 * (2 * gather + scatter), rel=REL)
    one = terms(dp_case_sw(3, SW.model_copy(update={"zero3_prefetch": False})))["dp comm"][0]
    assert terms(est)["dp comm"][0] > one  # twelve latencies cost more than one


def test_framework_overhead_per_layer_micro_batch_and_step():
    est = dp_case_sw(1, SW.model_copy(update={"layer_overhead_s": 1e-3, "step_overhead_s": 0.25}))
    assert terms(est)["framework overhead"] == pytest.approx((2 * 4 * 1e-3 + 0.25,) * 2, rel=REL)
    assert terms(dp_case(1))["framework overhead"] == (0.0, 0.0)


def test_megatron_reduces_fp16_gradients_in_16_bits():
    # Megatron-LM keeps FP16 gradients in the parameters' dtype unless --accumulate-allreduce-grads-in-fp32.
    est = dp_case(0, overlap=False, precision=Dtype.FP16)
    assert terms(est)["dp comm"][1] == pytest.approx(t_coll(Op.ALL_REDUCE, PARAMS * 2, NET), rel=REL)
    assert software_for("megatron-deepspeed", "ampere").grad_reduce_bytes_fp16 == 2.0  # DeepSpeed's FP16 engine


@pytest.mark.parametrize("zero", [0, 1])
def test_a_framework_reducing_after_the_backward_pass_exposes_the_whole_reduce(zero):
    # Megatron-LM's local DDP of 2021-22 (A100) and DeepSpeed's engine reduce once the backward pass is done.
    after = SW.model_copy(update={"grad_reduce_overlap": False})
    link, exposed = terms(dp_case_sw(zero, after))["dp comm"]
    assert exposed == pytest.approx(link, rel=REL) and link == pytest.approx(terms(dp_case(zero))["dp comm"][0])
    assert terms(dp_case(zero))["dp comm"][1] < link  # the same layout under an overlapping framework
    assert not software_for("megatron", "ampere").grad_reduce_overlap
    assert software_for("megatron", "hopper").grad_reduce_overlap
    assert not software_for("megatron-deepspeed", "hopper").grad_reduce_overlap


def test_a_framework_reducing_fp32_gradients_sends_twice_the_bytes():
    fp32 = SW.model_copy(update={"grad_reduce_bytes_fp16": 4.0})
    layout = Layout(dp=2, zero=1, dp_overlap=False)
    est = estimate(layout, devices=2, per_node=1, global_batch=4, network=1e9, sw=fp32, precision=Dtype.FP16)
    link = t_coll(Op.REDUCE_SCATTER, PARAMS * 4, NET) + t_coll(Op.ALL_GATHER, PARAMS * 2, NET)
    assert terms(est)["dp comm"][1] == pytest.approx(link, rel=REL)


def test_dp_hidden_entirely_on_a_fast_fabric():
    est = estimate(Layout(dp=2, zero=1), devices=2, global_batch=4, nvlink=1e13)
    link, exposed = terms(est)["dp comm"]
    assert link > 0 and exposed == 0.0


def test_dp_group_crosses_nodes_with_its_share_of_the_network():
    # tp 2 x dp 2 on two nodes of 2 devices: each DP group has one member per node and half the node's network.
    est = estimate(Layout(tp=2, dp=2, dp_overlap=False), devices=4, per_node=2, global_batch=4, network=1e9)
    params = 4 * (LAYER_PARAMS - 2 * H) / 2 + 4 * 2 * H + 2 * V * H / 2 + H  # TP splits matrices, not norms
    all_reduce = t_coll(Op.ALL_REDUCE, params * 2, Fabric("hand", 1, 2, NVLINK, 0.5e9, False))
    assert terms(est)["dp comm"][1] == pytest.approx(all_reduce, rel=REL)


# ---- totals ----------------------------------------------------------------------------------------------


def test_step_is_the_sum_of_exposed_terms_and_job_totals_follow():
    est = estimate(Layout(tp=2, pp=2, recompute="selective"), devices=4, global_batch=4, tokens=1e9)
    assert est.step_s == pytest.approx(sum(exposed for _, exposed in terms(est).values()), rel=REL)
    steps = math.ceil(1e9 / (4 * S))
    job = est.to_json()["job"]
    assert job["steps"] == steps
    assert job["time_s"] == pytest.approx(steps * est.step_s, rel=REL)
    assert job["device_hours"] == pytest.approx(steps * est.step_s / 3600 * 4, rel=REL)
    assert job["energy_kwh"] == pytest.approx(1000 * 4 * steps * est.step_s / 3.6e6, rel=REL)  # 1 kW boards
    assert job["cost_usd"] is None and "no instance" in job["price_note"]


def test_an_impossible_layout_is_refused():
    with pytest.raises(ClusterSimError, match="must equal the devices"):
        estimate(Layout(tp=2), devices=4)


def test_flat_zero_3_collectives_put_every_rank_on_its_own_network_share():
    # 4 devices on 2 nodes: hierarchical collectives see 2 nodes of 2 (the node's whole network);
    # flat ones see 4 ranks of 1, each with half its node's network.
    flat_sw = SW.model_copy(update={"zero3_hierarchical": False, "zero3_prefetch": False})
    hier_sw = SW.model_copy(update={"zero3_prefetch": False})
    layout = Layout(dp=4, zero=3)
    flat = estimate(layout, devices=4, per_node=2, global_batch=4, network=1e9, sw=flat_sw)
    hier = estimate(layout, devices=4, per_node=2, global_batch=4, network=1e9, sw=hier_sw)
    per_layer = PARAMS / 4 * 2
    flat_fabric = Fabric("hand", 1, 4, NVLINK, 0.5e9, False)
    hier_fabric = Fabric("hand", 2, 2, NVLINK, 1e9, False)
    for est, fabric in ((flat, flat_fabric), (hier, hier_fabric)):
        gather = t_coll(Op.ALL_GATHER, per_layer, fabric)
        scatter = t_coll(Op.REDUCE_SCATTER, per_layer, fabric)
        assert terms(est)["dp comm"][0] == pytest.approx(4 * (2 * gather + scatter), rel=REL)  # one micro-batch
    assert terms(flat)["dp comm"][0] > 1.5 * terms(hier)["dp comm"][0]
