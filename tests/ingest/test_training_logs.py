"""The Megatron and torchtitan training-log readers on real published outputs (tests/data/ingest/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.cli.app import app
from clustersim.errors import ClusterSimError
from clustersim.ingest import SystemOptions, ingest_files, read_files
from clustersim.ingest.megatron_log import read_megatron_log
from clustersim.ingest.torchtitan_log import read_torchtitan_log
from clustersim.validation.cases import as_case, read_cases
from clustersim.validation.training import predict_training_case

DATA = Path(__file__).resolve().parents[1] / "data" / "ingest"
GPT3 = DATA / "megatron_gpt3_7b_tp8_awsome_k8s.log"
SRUN = DATA / "megatron_gpt3_srun_awsome_slurm.log"
MIXTRAL = DATA / "megatron_mixtral_8x7b_issue756_excerpt.log"
CP2 = DATA / "torchtitan_llama3_8b_flex_cp2_pr1884.log"
DEBUG = DATA / "torchtitan_flex_debug_pr1437.log"
QWEN3 = DATA / "torchtitan_qwen3_32b_fsdp8_pr1690.log"
TP2PP2 = DATA / "megatron_gpt2_345m_tp2_pp2_a800_llm_action.log"
DP4 = DATA / "megatron_gpt2_345m_dp4_a800_llm_action.log"
DEEPSPEED = DATA / "megatron_deepspeed_llama_tp2_pp2_llm_action.log"
CATALOG = load_catalog(use_env=False)
GPT3_OPTIONS = SystemOptions(instance="p5.48xlarge", model=str(DATA / "gpt3-7.5b.toml"), seq_len=2048, dp=1)
runner = CliRunner()


def test_megatron_abbreviated_log_gives_layout_vocab_and_precision():
    run = read_megatron_log(GPT3)  # the arguments block elided: the init lines say the layout
    assert [(s.number, s.values["step_time_s"], s.global_batch) for s in run.steps] == [
        (1, 255.9405, 288),
        (2, 243.4383, 288),
        (3, 243.3444, 288),
    ]
    assert run.parallel == {"tp": 8, "pp": 1} and run.model == {"vocab": 51200} and run.precision == "fp16"
    assert run.lines["tp"] == 13 and run.lines["vocab"] == 11


def test_megatron_case_is_the_median_after_warmup_and_scores():
    (case,) = ingest_files([GPT3], GPT3_OPTIONS, CATALOG)
    assert case["measured"] == {"step_time_s": 243.3444}  # iterations 1 and 2 are warm-up by default
    assert case["parallel"] == {"tp": 8, "pp": 1, "global_batch": 288, "dp": 1}
    assert case["model"]["vocab"] == 51200 and case["model"]["seq_len"] == 2048 and case["precision"] == "fp16"
    assert case["system"] == {
        "instance": "p5.48xlarge",
        "accelerator": "h100-sxm",
        "devices": 8,
        "devices_per_node": 8,
        "nodes": 1,
    }
    assert "median of 1 logged steps (3-3" in case["notes"]
    every = ingest_files([GPT3], GPT3_OPTIONS.__class__(**{**GPT3_OPTIONS.__dict__, "warmup_steps": 0}), CATALOG)
    assert every[0]["measured"]["step_time_s"] == 243.4383  # the median of all three
    assert predict_training_case(as_case(case), "step_time_s", CATALOG) > 0


def test_megatron_full_arguments_block_gives_model_and_layout():
    run = read_megatron_log(TP2PP2)
    assert run.model == {
        "vocab": 50432,
        "layers": 24,
        "hidden": 1024,
        "ffn_hidden": 4096,
        "heads": 16,
        "head_dim": 64,  # kv_channels
        "seq_len": 1024,
        "ffn_type": "gelu",
    }
    assert run.parallel == {
        "dp": 1,
        "tp": 2,
        "pp": 2,
        "micro_batch": 4,
        "global_batch": 16,
        "sequence_parallel": True,
        "zero": 0,
        "recompute": "none",
    }
    assert (run.world_size, run.precision) == (4, "fp16")
    # nothing but the hardware from the options; iteration 100 holds the fp16 loss-scale search: skip it
    (case,) = ingest_files([TP2PP2], SystemOptions(accelerator="a100-sxm4-80gb", warmup_steps=100), CATALOG)
    assert case["measured"] == {"step_time_s": 1.05715}  # median of iterations 200, 1000, 1100, 2000
    assert case["system"]["devices"] == 4 and case["model"]["layers"] == 24
    (dp4,) = ingest_files([DP4], SystemOptions(accelerator="a100-sxm4-80gb", warmup_steps=100), CATALOG)
    assert dp4["parallel"]["dp"] == 4 and dp4["model"]["vocab"] == 50304 and dp4["measured"]["step_time_s"] == 0.2909
    assert predict_training_case(as_case(dp4), "step_time_s", CATALOG) > 0


def test_megatron_deepspeed_log_names_its_framework_and_zero_stage():
    run = read_megatron_log(DEEPSPEED)  # Megatron-DeepSpeed: num_key_value_heads, num_experts [1], zero_stage
    assert (run.framework, run.world_size, run.precision) == ("megatron-deepspeed", 8, "fp16")
    assert run.model["ffn_type"] == "swiglu" and run.model["kv_heads"] == 16 and "moe" not in run.model
    assert run.parallel["zero"] == 0 and (run.parallel["tp"], run.parallel["pp"], run.parallel["dp"]) == (2, 2, 2)
    assert [s.number for s in run.steps] == [1, 2, 3, 2498, 2499, 2500]
    (case,) = ingest_files([DEEPSPEED], SystemOptions(accelerator="a100-sxm4-80gb"), CATALOG)
    assert case["software"]["framework"] == "megatron-deepspeed" and case["measured"] == {"step_time_s": 1.20835}


def test_megatron_refuses_what_the_log_and_options_leave_open_or_contradict():
    base = GPT3_OPTIONS.__dict__
    with pytest.raises(ClusterSimError, match="does not state the model's seq_len; give --seq-len"):
        ingest_files([GPT3], SystemOptions(**{**base, "seq_len": None}), CATALOG)
    with pytest.raises(ClusterSimError, match="states no world size or data-parallel degree; give --dp"):
        ingest_files([GPT3], SystemOptions(**{**base, "dp": None}), CATALOG)
    with pytest.raises(ClusterSimError, match=r"line 13: the log says tp 8, --tp says 4"):
        ingest_files([GPT3], SystemOptions(**{**base, "tp": 4}), CATALOG)
    with pytest.raises(ClusterSimError, match=r"line 11: the log says vocab 51200, --model llama3-8b has 128256"):
        ingest_files([GPT3], SystemOptions(**{**base, "model": "llama3-8b"}), CATALOG)
    with pytest.raises(ClusterSimError, match="none past the 5 warm-up steps; give --warmup-steps below 3"):
        ingest_files([GPT3], SystemOptions(**{**base, "warmup_steps": 5}), CATALOG)


def test_megatron_srun_labels_and_an_arguments_excerpt():
    run = read_megatron_log(SRUN)  # srun's '1: ' labels
    assert [(s.number, s.values["step_time_s"]) for s in run.steps] == [(25, 0.087), (26, 0.0865), (27, 0.0884)]
    with pytest.raises(ClusterSimError, match=r"does not state tp or pp .*give --tp and --pp"):
        ingest_files([SRUN], SystemOptions(instance="p4de.24xlarge", model="llama3-8b", seq_len=2048), CATALOG)
    mixtral = read_megatron_log(MIXTRAL)  # an excerpt of the arguments block, pasted in an issue
    assert mixtral.parallel == {"ep": 8, "global_batch": 128}
    assert mixtral.model == {"ffn_hidden": 14336, "hidden": 4096} and mixtral.precision is None
    assert [s.values["model_tflops_per_device"] for s in mixtral.steps] == [243.6, 238.7, 224.0]
    with pytest.raises(ClusterSimError, match="does not state tp or pp"):
        ingest_files([MIXTRAL], SystemOptions(instance="p5.48xlarge", model="mixtral-8x7b"), CATALOG)


def test_megatron_malformed_and_truncated_lines_name_the_line(tmp_path: Path):
    lines = GPT3.read_text().splitlines()
    cut = tmp_path / "cut.log"
    cut.write_text("\n".join([*lines[:30], lines[30][:60]]) + "\n")
    with pytest.raises(ClusterSimError, match=r"cut.log, line 31: iteration 2 has no elapsed time"):
        read_megatron_log(cut)
    bad = tmp_path / "bad.log"
    bad.write_text(GPT3.read_text().replace("243438.3", "nan"))
    with pytest.raises(ClusterSimError, match=r"bad.log, line 31: elapsed time is 'nan'; valid: a number > 0"):
        read_megatron_log(bad)
    both = tmp_path / "both.log"
    stated = "  tensor_model_parallel_size .......... 4\nusing torch"
    both.write_text(GPT3.read_text().replace("...\nusing torch", stated, 1))
    with pytest.raises(ClusterSimError, match=r"line 1: tp is 4 here but 8 on line 13"):
        read_megatron_log(both)


def test_torchtitan_ranks_dedup_and_launch_line_config():
    run = read_torchtitan_log(CP2)
    steps = [(s.number, s.line, s.values["tokens_per_s_per_device"]) for s in run.steps]
    assert steps == [(1, 3, 86.0), (10, 7, 5615.0)]
    assert run.steps[1].values["mfu"] == pytest.approx(0.3288) and run.world(None) == 4
    assert run.world_size is None and run.system == {"ranks_per_node": 4}  # NGPU=4: ranks per node, no mesh printed
    assert run.parallel == {"recompute": "full", "cp": 2, "zero": 3} and run.precision == "bf16"
    options = SystemOptions(accelerator="h100-sxm", model="llama3-8b", seq_len=8192, tp=1, pp=1, global_batch=2)
    (case,) = ingest_files([CP2], options, CATALOG)
    assert case["parallel"]["dp"] == 2 and case["system"]["devices"] == 4
    assert case["software"]["framework"] == "torchtitan"
    assert case["measured"] == {"mfu": 0.3288, "model_tflops_per_device": 325.2, "tokens_per_s_per_device": 5615.0}
    predicted = predict_training_case(as_case(case), "tokens_per_s_per_device", CATALOG)
    assert 0.5 < predicted / 5615.0 < 2.0
    said = r"line 1: the log ran 4 ranks per node x 1 node\(s\) \(one node: no --nodes\) = 4 ranks, not dp 1 x tp 1"
    with pytest.raises(ClusterSimError, match=said):
        ingest_files([CP2], SystemOptions(**{**options.__dict__, "dp": 1}), CATALOG)


def test_torchtitan_debug_and_single_line_outputs(tmp_path: Path):
    run = read_torchtitan_log(DEBUG)
    assert [s.number for s in run.steps] == list(range(3, 11))
    assert run.steps[0].values["tokens_per_s_per_device"] == 30768
    with pytest.raises(ClusterSimError, match="does not state the model's layers, hidden, ffn_hidden, heads, vocab"):
        ingest_files([DEBUG], SystemOptions(accelerator="h100-sxm", tp=1, pp=1, dp=1, global_batch=8), CATALOG)
    (qwen,) = read_torchtitan_log(QWEN3).steps
    assert (qwen.number, qwen.values["model_tflops_per_device"], qwen.values["mfu"]) == (50, 389.87, 0.3942)
    cut = tmp_path / "cut.log"
    cut.write_text(DEBUG.read_text().splitlines()[0][:159] + "\n")
    with pytest.raises(ClusterSimError, match=r"cut.log, line 1: step 3 has no 'tps: ... tflops: ... mfu: ...%'"):
        read_torchtitan_log(cut)


def test_reader_is_chosen_by_content_and_the_cli_says_which(tmp_path: Path):
    renamed = tmp_path / "run.txt"
    renamed.write_text(CP2.read_text())
    options = SystemOptions(accelerator="h100-sxm", model="llama3-8b", seq_len=8192, tp=1, pp=1, global_batch=2)
    assert [f.reader for f in read_files([renamed], options, CATALOG)] == ["torchtitan"]
    with pytest.raises(ClusterSimError, match="--seq-len applies to training logs"):
        read_files([DATA / "a3mega_2nodes_all_reduce.log"], SystemOptions(inter_node_gbps=1600, seq_len=4), CATALOG)
    out = tmp_path / "cases.jsonl"
    args = ["ingest", str(GPT3), str(CP2), "-o", str(out), "--accelerator", "h100-sxm", "--seq-len", "2048"]
    refused = runner.invoke(app, [*args, "--json"])
    assert refused.exit_code == 2 and not out.exists()  # nothing half-written
    args = ["ingest", str(GPT3), "-o", str(out), "--instance", "p5.48xlarge", "--dp", "1", "--seq-len", "2048"]
    result = runner.invoke(app, [*args, "--model", str(DATA / "gpt3-7.5b.toml"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["read"] == [{"file": str(GPT3), "reader": "megatron", "cases": 1}]
    assert [c.kind for c in read_cases(out)] == ["training"]


MULTI_NODE = DATA / "torchtitan_llama3_70b_pp16_2nodes_issue1232.log"  # NGPU=8 on 2 nodes, PP 16
COMPILED = DATA / "torchtitan_agpt_2b_xpu_2nodes_compiled_ezpz.log"  # --compile.enable, 2 nodes of 12 XPUs


def test_torchtitan_multi_node_log_takes_ngpu_per_node_times_the_nodes(tmp_path: Path):
    run = read_torchtitan_log(MULTI_NODE)
    assert run.system == {"ranks_per_node": 8} and run.world_size is None and run.world(2) == 16
    assert (run.parallel["global_batch"], run.model["seq_len"]) == (2, 4096)  # 'Trainer is initialized with ...'
    options = SystemOptions(instance="p4de.24xlarge", nodes=2, model="llama3-70b", tp=1, pp=16)
    (case,) = ingest_files([MULTI_NODE], options, CATALOG)
    assert case["system"] | {"accelerator": None} == {
        "instance": "p4de.24xlarge", "accelerator": None, "devices": 16, "devices_per_node": 8, "nodes": 2}  # fmt: skip
    assert case["parallel"]["dp"] == 1 and case["measured"]["tokens_per_s_per_device"] == 8.0
    assert case["software"] == {"framework": "torchtitan", "version": "torchtitan training log", "compiled": None}
    # one node of 8 ranks cannot hold pp 16: refused naming where the 8 come from
    said = r"line 1: the log ran 8 ranks per node x 1 node\(s\) \(--nodes\) = 8 ranks, which tp 1 x pp 16 x cp 1 = 16 "
    with pytest.raises(ClusterSimError, match=said):
        ingest_files([MULTI_NODE], SystemOptions(**{**options.__dict__, "nodes": 1}), CATALOG)
    # torchrun's own flags say the same as NGPU and --nodes
    launched = tmp_path / "torchrun.log"
    launched.write_text(
        "+ torchrun --nnodes 2 --nproc_per_node=8 --rdzv_backend c10d -m torchtitan.train\n" + MULTI_NODE.read_text()
    )
    assert read_torchtitan_log(launched).world(None) == 16 and read_torchtitan_log(launched).world(4) == 16


def test_torchtitan_log_says_whether_it_compiled(tmp_path: Path):
    run = read_torchtitan_log(COMPILED)
    assert run.compiled is True and run.lines["compiled"] == 1  # the launch line's --compile.enable
    assert run.parallel["global_batch"] == 48 and run.model["seq_len"] == 8192
    assert "torch.compile on: line 1" in run.notes
    # the same log without the flag and the compile line: wrapped in FSDP with no block compiled, eager
    eager = tmp_path / "eager.log"
    lines = [line for line in COMPILED.read_text().splitlines() if "Compiling each TransformerBlock" not in line]
    eager.write_text("\n".join(line.replace(" --compile.enable", "") for line in lines) + "\n")
    quiet = read_torchtitan_log(eager)
    assert quiet.compiled is False and "Applied FSDP to the model" in lines[quiet.lines["compiled"] - 1]
    assert read_torchtitan_log(QWEN3).compiled is None  # one metric line says nothing
    clashing = tmp_path / "clash.log"
    clashing.write_text("--training.compile=false\n" + COMPILED.read_text())
    with pytest.raises(ClusterSimError, match=r"clash.log, line 2: compiled is True here but False on line 1"):
        read_torchtitan_log(clashing)


@pytest.mark.parametrize(
    ("line", "compiled"),
    [
        ("[rank0]:[titan] 2024-12-03 - root - INFO - Compiled each TransformerBlock with torch.compile", True),
        ("NGPU=8 ./run_train.sh --training.compile", True),
        ("NGPU=8 ./run_train.sh --compile.enable=False", False),
        ('NGPU=8 ./run_train.sh --compile.enable="true" --training.steps 10', True),
        ("NGPU=8 ./run_train.sh --compile.enable_loss", None),  # another flag
        ("[rank0]:[titan] - root - INFO - Compiling the loss function with torch.compile", None),  # not the blocks
    ],
)
def test_torchtitan_compile_lines_and_flags(tmp_path: Path, line: str, compiled: bool | None):
    log = tmp_path / "titan.log"
    log.write_text(line + "\n" + QWEN3.read_text())
    assert read_torchtitan_log(log).compiled is compiled


MESH = (
    "[rank0]:[titan] 2025-06-26 18:12:46,592 - root - INFO - Building 2-D device mesh with ['dp_shard', 'tp'], [{}, {}]"
)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 16), st.integers(1, 64), st.integers(1, 64), st.integers(1, 8), st.booleans())
def test_the_world_is_the_mesh_else_ranks_per_node_times_nodes(
    per_node: int, nodes: int, shard: int, tp: int, mesh: bool
):
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "titan.log"
        lines = [f"NGPU={per_node} ./run_train.sh", *([MESH.format(shard, tp)] if mesh else []), QWEN3.read_text()]
        log.write_text("\n".join(lines))
        run = read_torchtitan_log(log)
    assert run.world(nodes) == (shard * tp if mesh else per_node * nodes)
    assert run.world(None) == (shard * tp if mesh else per_node)  # one node where no --nodes is given


def _selective_log(tmp_path: Path, modules: str) -> Path:
    """The TP2 PP2 log as Megatron-Core prints a selective recompute of ``modules`` (its arguments block lists
    ``recompute_modules`` after ``recompute_method``)."""
    text = TP2PP2.read_text().replace(
        "  recompute_granularity ........................... None\n"
        "  recompute_method ................................ None\n",
        "  recompute_granularity ........................... selective\n"
        "  recompute_method ................................ None\n"
        f"  recompute_modules ............................... {modules}\n",
    )
    path = tmp_path / "selective.log"
    path.write_text(text)
    return path


def test_megatron_selective_recompute_states_the_modules_it_prints(tmp_path: Path):
    run = read_megatron_log(_selective_log(tmp_path, "['moe_act', 'layernorm']"))
    assert run.parallel["recompute"] == "selective" and run.parallel["recompute_modules"] == ["moe_act", "layernorm"]
    assert run.lines["recompute_modules"] == 166
    (case,) = ingest_files(
        [_selective_log(tmp_path, "['core_attn']")], SystemOptions(accelerator="a100-sxm4-80gb", warmup_steps=100),
        CATALOG,
    )  # fmt: skip
    assert case["parallel"]["recompute_modules"] == ["core_attn"]
    assert as_case(case).parallel.recompute_modules == ["core_attn"]
    assert predict_training_case(as_case(case), "step_time_s", CATALOG) > 0
    none = read_megatron_log(_selective_log(tmp_path, "None"))  # Megatron's default modules, not printed
    assert none.parallel["recompute"] == "selective" and "recompute_modules" not in none.parallel


def test_megatron_recompute_modules_it_cannot_price_are_refused_naming_the_line(tmp_path: Path):
    with pytest.raises(ClusterSimError, match=r"line 166: recompute_modules .*unknown up_proj \(valid: core_attn"):
        read_megatron_log(_selective_log(tmp_path, "['mlp', 'up_proj']"))


def _moe_log(tmp_path: Path, **lines: str) -> Path:
    """The TP2 PP2 log's 24 blocks as a MoE run, Megatron-Core's MoE arguments printed in its block."""
    printed = {
        "num_experts": "64",
        "moe_router_topk": "6",
        "moe_ffn_hidden_size": "1024",
        "moe_shared_expert_intermediate_size": "2048",
        "moe_layer_freq": "[0, " + ", ".join(["1"] * 23) + "]",
    } | lines
    block = "".join(f"  {name} {'.' * (48 - len(name))} {value}\n" for name, value in printed.items())
    text = TP2PP2.read_text().replace("  num_experts ..................................... None\n", "", 1)
    text = text.replace("  recompute_method ....", block + "  recompute_method ....", 1)
    path = tmp_path / "moe.log"
    path.write_text(text)
    return path


def test_megatron_moe_log_gives_the_experts_width_shared_experts_and_leading_dense_blocks(tmp_path: Path):
    run = read_megatron_log(_moe_log(tmp_path))
    assert run.model["moe"] == {"experts": 64, "top_k": 6, "shared_experts": 2}
    # the case format's MoE shape: ffn_hidden an expert's, the dense blocks' width apart
    assert (run.model["ffn_hidden"], run.model["dense_layers"], run.model["dense_ffn_hidden"]) == (1024, 1, 4096)
    (case,) = ingest_files([_moe_log(tmp_path)], SystemOptions(accelerator="h100-sxm", warmup_steps=100), CATALOG)
    shape = as_case(case).model.shape()
    assert shape["ffn_hidden"] == 4096 and shape["moe"]["expert_ffn_hidden"] == 1024 and shape["dense_layers"] == 1
    assert predict_training_case(as_case(case), "step_time_s", CATALOG) > 0
    every = read_megatron_log(_moe_log(tmp_path, moe_layer_freq="1", moe_shared_expert_intermediate_size="None"))
    assert every.model["ffn_hidden"] == 1024 and "dense_layers" not in every.model
    assert every.model["moe"]["shared_experts"] == 0


@pytest.mark.parametrize(
    ("lines", "words"),
    [
        ({"moe_layer_freq": "2"}, r"moe_layer_freq '2' is not read into a case \(valid: 1, every block"),
        ({"moe_layer_freq": "[1, 0, 1]"}, r"moe_layer_freq '\[1, 0, 1\]' is not read"),
        (
            {"moe_shared_expert_intermediate_size": "1500"},
            r"moe_shared_expert_intermediate_size 1500 is not a whole number",
        ),
        ({"moe_ffn_hidden_size": "-5"}, r"moe_ffn_hidden_size is '-5' \(valid: a whole number > 0\)"),
    ],
)
def test_megatron_moe_arguments_the_format_cannot_hold_are_refused_naming_the_line(
    tmp_path: Path, lines: dict[str, str], words: str
):
    with pytest.raises(ClusterSimError, match=r"moe.log, line \d+: " + words):
        read_megatron_log(_moe_log(tmp_path, **lines))


@pytest.mark.parametrize(
    ("lines", "dispatcher"),
    [
        ({"moe_token_dispatcher_type": "alltoall"}, "alltoall"),
        ({"moe_token_dispatcher_type": "flex", "moe_flex_dispatcher_backend": "hybridep"}, "hybridep"),
        ({"moe_token_dispatcher_type": "flex", "moe_flex_dispatcher_backend": "deepep"}, "deepep"),
        ({"moe_token_dispatcher_type": "flex", "moe_enable_deepep": "True"}, "deepep"),  # Megatron-Core 0.12-0.13
        ({"moe_token_dispatcher_type": "allgather"}, None),  # no name in the case format: noted, the framework's
    ],
)
def test_megatron_moe_log_gives_its_expert_layout(tmp_path: Path, lines: dict[str, str], dispatcher: str | None):
    printed = {"expert_tensor_parallel_size": "1", "overlap_moe_expert_parallel_comm": "True", **lines}
    run = read_megatron_log(_moe_log(tmp_path, **printed))
    assert run.parallel["etp"] == 1 and run.parallel["ep_overlap"] is True
    assert run.parallel.get("ep_dispatcher") == dispatcher
    assert (dispatcher is None) == any("moe_token_dispatcher_type allgather" in note for note in run.notes)


def test_megatron_deepseek_style_log_gives_latent_attention_group_routing_and_mtp(tmp_path: Path):
    mla = {"multi_latent_attention": "True", "q_lora_rank": "384", "kv_lora_rank": "128", "qk_head_dim": "64",
           "qk_pos_emb_head_dim": "32", "v_head_dim": "64"}  # fmt: skip
    routing = {"moe_router_num_groups": "8", "moe_router_group_topk": "4", "mtp_num_layers": "1"}
    path = _moe_log(tmp_path, **mla, **routing)
    swiglu = "  swiglu .......................................... "
    path.write_text(path.read_text().replace(swiglu + "False", swiglu + "True"))  # DeepSeek's: no linear biases
    run = read_megatron_log(path)
    assert run.model["mla"] == {"q_lora_rank": 384, "kv_lora_rank": 128, "qk_head_dim": 64,
                                "qk_pos_emb_head_dim": 32, "v_head_dim": 64}  # fmt: skip
    assert (run.model["moe"]["groups"], run.model["moe"]["group_top_k"], run.model["mtp_layers"]) == (8, 4, 1)
    (case,) = ingest_files([path], SystemOptions(accelerator="h100-sxm", warmup_steps=100), CATALOG)
    shape = as_case(case).model.shape()
    assert shape["head_dim"] == 96 and shape["mla"]["kv_lora_rank"] == 128 and shape["moe"]["groups"] == 8
    assert predict_training_case(as_case(case), "step_time_s", CATALOG) > 0
    no_query_rank = read_megatron_log(_moe_log(tmp_path, **(mla | {"q_lora_rank": "None"})))
    assert no_query_rank.model["mla"]["q_lora_rank"] == 0
    missing = {k: v for k, v in mla.items() if k != "v_head_dim"}
    with pytest.raises(ClusterSimError, match=r"multi_latent_attention is True but v_head_dim is not printed"):
        read_megatron_log(_moe_log(tmp_path, **missing))


@pytest.mark.parametrize(
    ("lines", "precision"),
    [
        ({"fp8": "hybrid", "fp8_recipe": "tensorwise"}, "fp8"),
        ({"fp8": "e4m3", "fp8_recipe": "blockwise"}, "fp8"),
        ({"fp8": "e4m3", "fp8_recipe": "mxfp8"}, "mxfp8"),  # block-scaled: Blackwell's own format
        ({"fp8": "e4m3", "fp4": "e2m1", "fp4_recipe": "nvfp4"}, "nvfp4"),  # 4-bit where both are set
    ],
)
def test_megatron_log_gives_its_low_precision_format(tmp_path: Path, lines: dict[str, str], precision: str):
    text = TP2PP2.read_text().replace("  fp8 ............................................. None\n", "", 1)
    block = "".join(f"  {name} {'.' * (48 - len(name))} {value}\n" for name, value in lines.items())
    path = tmp_path / "low.log"
    path.write_text(text.replace("  recompute_method ....", block + "  recompute_method ....", 1))
    run = read_megatron_log(path)
    assert run.precision == precision and any(lines.get("fp4", lines["fp8"]) in note for note in run.notes)
    path.write_text(
        path.read_text().replace(
            "fp4_recipe ...................................... nvfp4",
            "fp4_recipe ...................................... custom",
        )
    )
    if "fp4" in lines:
        with pytest.raises(ClusterSimError, match=r"low.log, line \d+: fp4_recipe 'custom' is not read into a case"):
            read_megatron_log(path)


@pytest.mark.parametrize(
    ("lines", "state"),
    [
        ({"cuda_graph_impl": "none"}, "none"),
        ({"cuda_graph_impl": "transformer_engine", "cuda_graph_scope": "['attn', 'moe_router', 'moe_preprocess']"},
         "partial"),
        ({"cuda_graph_impl": "local", "cuda_graph_scope": "full_iteration"}, "full"),
        ({"enable_cuda_graph": "False", "external_cuda_graph": "False"}, "none"),  # Megatron-Core before 0.14
        ({"external_cuda_graph": "True"}, "partial"),
        ({}, None),  # not printed: not said
    ],
)  # fmt: skip
def test_megatron_log_says_whether_it_captured_cuda_graphs(tmp_path: Path, lines: dict[str, str], state: str | None):
    run = read_megatron_log(_moe_log(tmp_path, **lines))
    assert run.software.get("cuda_graphs") == state
    assert any(note.startswith(f"CUDA graphs: {state} (line ") for note in run.notes) == (state is not None)


def test_a_low_precision_megatron_log_gives_the_layers_it_keeps_in_bf16(tmp_path: Path):
    """first_last_layers_bf16 with num_layers_at_start/end_in_bf16 becomes the case's software.bf16_layers in an 8-
    or 4-bit run (Megatron-Core's defaults, 1 and 1, where the log leaves a count out); a 16-bit run's flag is noted,
    not read; a count that is not one is refused, naming its line."""
    fp8 = {"fp8": "hybrid", "fp16": "False", "bf16": "True", "first_last_layers_bf16": "True"}
    run = read_megatron_log(_moe_log(tmp_path, **fp8, num_layers_at_start_in_bf16="0", num_layers_at_end_in_bf16="2"))
    assert run.precision == "fp8" and run.software["bf16_layers"] == 2
    assert any("2 layers in BF16 (first_last_layers_bf16" in note for note in run.notes)
    (case,) = ingest_files([run.path], SystemOptions(accelerator="h100-sxm", warmup_steps=100), CATALOG)
    assert case["software"]["bf16_layers"] == 2
    assert predict_training_case(as_case(case), "step_time_s", CATALOG) > 0
    defaults = read_megatron_log(_moe_log(tmp_path, **fp8))
    assert defaults.software["bf16_layers"] == 2  # one at each end
    off = read_megatron_log(_moe_log(tmp_path, **fp8 | {"first_last_layers_bf16": "False"}))
    assert "bf16_layers" not in off.software
    sixteen = read_megatron_log(_moe_log(tmp_path, first_last_layers_bf16="True"))
    assert "bf16_layers" not in sixteen.software
    assert any("first_last_layers_bf16 in a fp16 run" in note for note in sixteen.notes)
    with pytest.raises(ClusterSimError, match=r"line \d+: num_layers_at_end_in_bf16 is 'two', not a count"):
        read_megatron_log(_moe_log(tmp_path, **fp8, num_layers_at_end_in_bf16="two"))
