"""The vLLM serving-benchmark reader on real published outputs (tests/data/ingest/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.ingest import SystemOptions, ingest_files
from clustersim.ingest.serving_cases import _check_carried, model_fields
from clustersim.ingest.vllm_bench import read_vllm_bench
from clustersim.validation.case_model import case_transformer
from clustersim.validation.cases import CaseModel, as_case
from clustersim.validation.inference import predict_inference_case
from clustersim.workload.zoo import load_model

DATA = Path(__file__).resolve().parents[1] / "data" / "ingest"
QWEN = DATA / "vllm_qwen2_7b_2xa100_dennislee22.txt"
GAUDI = DATA / "vllm_gaudi_pp_local_test_res.txt"
CATALOG = load_catalog(use_env=False)


def test_result_blocks_among_log_lines_and_as_comments():
    first, second = read_vllm_bench(QWEN)
    assert (first.line, first.values["output_throughput"], first.values["mean_tpot_ms"]) == (8, 218.04, 43.77)
    assert "max_concurrency" not in first.values and second.values["total_input_tokens"] == 40952
    runs = read_vllm_bench(GAUDI)  # a script keeping two runs as '# ' comments, the concurrency printed above
    assert [(r.line, r.values["max_concurrency"], r.values["output_throughput"]) for r in runs] == [
        (5, 32, 434.4),
        (31, 32, 329.86),
    ]


def test_a_run_becomes_an_inference_case_the_model_scores():
    options = SystemOptions(accelerator="a100-sxm4-40gb", model=str(DATA / "qwen2-7b.toml"), tp=2)
    cases = ingest_files([QWEN], options, CATALOG)
    assert [c["measured"]["output_tokens_per_s"] for c in cases] == [218.04, 207.81]
    first = cases[0]
    assert first["workload"] == {
        "input_tokens": 1023.9,
        "output_tokens": 1024.0,
        "scenario": "concurrency",
        "batch": 10,
    }
    assert first["system"] == {"accelerator": "a100-sxm4-40gb", "devices": 2, "devices_per_node": 2, "nodes": 1}
    assert first["parallel"] == {"tp": 2, "pp": 1, "dp": 1} and first["model"]["hidden"] == 3584
    assert first["measured"]["ttft_s"] == pytest.approx(2.11151) and first["source"].startswith(QWEN.name + " line 8")
    assert predict_inference_case(as_case(first, "inference"), "output_tokens_per_s", CATALOG) > 0


def test_what_a_serving_run_does_not_print_must_be_given(tmp_path: Path):
    with pytest.raises(ClusterSimError, match="give --model"):
        ingest_files([QWEN], SystemOptions(accelerator="a100-sxm4-40gb"), CATALOG)
    with pytest.raises(ClusterSimError, match="give --instance or --accelerator"):
        ingest_files([GAUDI], SystemOptions(model="llama3.1-8b"), CATALOG)
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join(QWEN.read_text().splitlines()[:20]) + "\n")
    with pytest.raises(ClusterSimError, match=r"cut.txt, line 20: the result block starting on line 8 ends without"):
        read_vllm_bench(cut)
    bad = tmp_path / "bad.txt"
    bad.write_text(QWEN.read_text().replace("218.04", "n/a"))
    with pytest.raises(ClusterSimError, match=r"bad.txt, line 14: Output token throughput \(tok/s\) is 'n/a'"):
        read_vllm_bench(bad)
    rate = tmp_path / "rate.json"
    keys = ("completed", "total_input_tokens", "total_output_tokens", "output_throughput", "mean_ttft_ms")
    rate.write_text(json.dumps({**dict.fromkeys(keys, 10), "mean_tpot_ms": 40.0, "request_rate": 4.0}))
    with pytest.raises(ClusterSimError, match="request rate 4/s is an open loop"):
        ingest_files([rate], SystemOptions(instance="p5.48xlarge", model="llama3.1-8b"), CATALOG)


@pytest.mark.parametrize("name", ["deepseek-v3", "gpt-oss-120b", "llama4-maverick"])
def test_a_zoo_model_with_latent_attention_windows_or_dense_blocks_is_carried_by_the_case(name: str):
    """The case's model states the extra context the reader takes (latent attention, dense MLP blocks,
    sliding windows): read back, it has the zoo's KV cache and, within the norms and biases no field holds,
    its parameters and FLOPs (Maverick's every-other-layer MoE as 24 dense blocks: priced alike)."""
    options = SystemOptions(instance="p5en.48xlarge", model=name, tp=8, precision="fp8")
    case = as_case(ingest_files([QWEN], options, CATALOG)[0], "inference")
    zoo = load_model(name, use_env=False)
    read, _ = case_transformer(case.model, "test")
    assert read.kv_cache_elements == zoo.kv_cache_elements and read.mla == zoo.mla
    assert (read.sliding_window, read.window_layers) == (zoo.sliding_window, zoo.window_layers)
    assert read.num_params() == pytest.approx(zoo.num_params(), rel=0.01)
    assert read.model_flops_per_token(4096) == pytest.approx(zoo.model_flops_per_token(4096), rel=0.01)
    assert predict_inference_case(case, "output_tokens_per_s", CATALOG) > 0


def test_a_case_that_reads_back_as_another_shape_is_refused():
    other = model_fields(load_model("qwen3-8b", use_env=False))
    with pytest.raises(ClusterSimError, match=r"--model qwen3-14b: a case's model cannot carry its shape \(parameters"):
        _check_carried(load_model("qwen3-14b", use_env=False), other)


@pytest.mark.parametrize("name", ["gemma3-27b", "nemotron-3-nano-30b-a3b"])
def test_a_models_architecture_fields_travel_with_its_case(name: str):
    """Gemma 3's tied embeddings and a Mamba-2 hybrid's layer kinds are written, so the case reads back as the model
    even under a name the zoo does not hold (within Gemma's four norms a block, which have no field)."""
    zoo = load_model(name, use_env=False)
    fields = model_fields(zoo) | {"name": "not-in-the-zoo"}
    read, assumed = case_transformer(CaseModel.model_validate(fields), "test")
    assert "architecture" not in assumed and read.tied_embeddings == zoo.tied_embeddings
    assert (read.linear_attention, read.mlp_free_layers) == (zoo.linear_attention, zoo.mlp_free_layers)
    assert read.num_params() == pytest.approx(zoo.num_params(), rel=0.001)
