"""The trtllm-bench and genai-perf/AIPerf readers on real published outputs (tests/data/ingest/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.cli.app import app
from clustersim.errors import ClusterSimError
from clustersim.ingest import SystemOptions, ingest_files, reader_of
from clustersim.ingest.genai_perf import read_genai_perf
from clustersim.ingest.trtllm_bench import read_trtllm_bench
from clustersim.validation.cases import as_case
from clustersim.validation.inference import predict_inference_case

DATA = Path(__file__).resolve().parents[1] / "data" / "ingest"
TRT = DATA / "trtllm_bench_llama31_8b_fp8_docs.log"
TORCH = DATA / "trtllm_bench_llama31_8b_pytorch_docs.log"
MULTIMODAL = DATA / "trtllm_bench_qwen2vl_multimodal_docs.log"
GP_TRT = DATA / "genai_perf_gpt2_trtllm_readme.txt"
GP_VLLM = DATA / "genai_perf_gpt2_vllm_tutorial.txt"
GP_WRAPPED = DATA / "genai_perf_process_export_files.txt"
AIPERF = DATA / "aiperf_qwen3_06b_readme.txt"
GPT2 = str(DATA / "gpt2.toml")
CATALOG = load_catalog(use_env=False)
runner = CliRunner()


def test_trtllm_bench_both_layouts():
    run = read_trtllm_bench(TRT)  # 0.17: the request details inside the performance overview
    assert run.values == {
        "mean_input_tokens": 128.0,
        "mean_output_tokens": 128.0,
        "completed": 3000.0,
        "output_throughput": 28390.4265,
    }
    # 0.17's 'Token Throughput' counts generated tokens: requests x output length / total latency
    assert run.values["output_throughput"] == pytest.approx(3000 * 128 / 13.5256862, rel=1e-6)
    assert (run.parallel, run.precision, run.kv_precision, run.offline) == ({"tp": 1, "pp": 1}, "fp8", "fp8", True)
    assert run.version == "TensorRT-LLM 0.17.0" and run.model_id == "meta-llama/Llama-3.1-8B"
    assert read_trtllm_bench(TORCH).kv_precision is None  # 'KV Cache Dtype: None'
    later = read_trtllm_bench(MULTIMODAL)  # the later layout: REQUEST DETAILS first, 'Total Output Throughput'
    assert later.values["output_throughput"] == 185.8351 and later.values["mean_input_tokens"] == 411.6
    assert later.parallel == {"tp": 1, "pp": 1} and later.precision is None


def test_trtllm_bench_case_scores_near_the_published_h100_number():
    (case,) = ingest_files([TRT], SystemOptions(instance="p5.48xlarge", model="llama3.1-8b"), CATALOG)
    assert case["workload"] == {"input_tokens": 128.0, "output_tokens": 128.0, "scenario": "offline", "batch": None}
    assert case["software"] == {"framework": "tensorrt-llm", "version": "TensorRT-LLM 0.17.0"}
    assert (case["precision"], case["kv_precision"], case["system"]["devices"]) == ("fp8", "fp8", 1)
    predicted = predict_inference_case(as_case(case, "inference"), "output_tokens_per_s", CATALOG)
    assert 0.5 < predicted / 28390.4265 < 2.0
    with pytest.raises(ClusterSimError, match=r"line 53: the output says tp 1, --tp says 2"):
        ingest_files([TRT], SystemOptions(instance="p5.48xlarge", model="llama3.1-8b", tp=2), CATALOG)
    with pytest.raises(ClusterSimError, match="the output says precision fp8, --precision says bf16"):
        ingest_files([TRT], SystemOptions(instance="p5.48xlarge", model="llama3.1-8b", precision="bf16"), CATALOG)
    with pytest.raises(ClusterSimError, match=r"at 8 per node are 1 node\(s\), --nodes says 2"):
        ingest_files([TRT], SystemOptions(instance="p5.48xlarge", model="llama3.1-8b", nodes=2), CATALOG)
    bounded = ingest_files([TRT], SystemOptions(instance="p5.48xlarge", model="llama3.1-8b", concurrency=64), CATALOG)
    assert bounded[0]["workload"]["scenario"] == "concurrency" and bounded[0]["workload"]["batch"] == 64


def test_trtllm_bench_cut_and_malformed_outputs(tmp_path: Path):
    lines = TRT.read_text().splitlines()
    cut = tmp_path / "cut.log"
    cut.write_text("\n".join(lines[:57]) + "\n")  # ends before the throughput line
    with pytest.raises(ClusterSimError, match=r"cut.log, line 57: the '= PERFORMANCE OVERVIEW' section on line 53"):
        read_trtllm_bench(cut)
    early = tmp_path / "early.log"
    early.write_text("\n".join(lines[:40]) + "\n")  # is not even trtllm-bench output to the dispatcher
    with pytest.raises(ClusterSimError, match=r"early.log, line 40: no '= PERFORMANCE OVERVIEW' section"):
        read_trtllm_bench(early)
    twice = tmp_path / "twice.log"
    twice.write_text(TRT.read_text() + TORCH.read_text())
    with pytest.raises(ClusterSimError, match=r"lines 53 and 92: two runs in one file"):
        read_trtllm_bench(twice)
    quantized = tmp_path / "awq.log"
    quantized.write_text(TRT.read_text().replace("Quantization:           FP8", "Quantization:           W4A16_AWQ"))
    with pytest.raises(ClusterSimError, match=r"awq.log, line 37: quantization 'W4A16_AWQ' is not a case precision"):
        read_trtllm_bench(quantized)
    bad = tmp_path / "bad.log"
    bad.write_text(TRT.read_text().replace("28390.4265", "28,390"))
    with pytest.raises(ClusterSimError, match=r"bad.log, line 58: Token Throughput \(tokens/sec\) is '28,390'"):
        read_trtllm_bench(bad)


def test_genai_perf_tables_old_and_wrapped():
    (run,) = read_genai_perf(GP_TRT)
    assert run.values == {
        "mean_ttft_ms": 16.26,
        "mean_tpot_ms": 1.85,
        "mean_output_tokens": 261.9,
        "mean_input_tokens": 550.06,
        "output_throughput": 520.87,
        "max_concurrency": 1,
    }
    assert "GenAI-Perf's default 1 assumed" in run.notes[0] and run.framework is None
    (wrapped,) = read_genai_perf(GP_WRAPPED)  # 'Output Token Throughput Per User' wraps onto a second row
    assert wrapped.values["output_throughput"] == 443.39 and wrapped.values["completed"] == 20
    assert wrapped.values["mean_output_tokens"] == 15.95


def test_aiperf_table_thousands_separators_and_options():
    (run,) = read_genai_perf(AIPERF, concurrency=10)  # the README's command: --concurrency 10
    assert run.values["output_throughput"] == 10944.03 and run.values["completed"] == 711
    assert (run.values["mean_ttft_ms"], run.values["mean_tpot_ms"], run.values["max_concurrency"]) == (18.26, 11.23, 10)
    assert run.tool == "AIPerf LLM metrics" and "concurrency 10 from --concurrency" in run.notes
    with pytest.raises(ClusterSimError, match="give --model"):
        ingest_files([AIPERF], SystemOptions(accelerator="h100-sxm", concurrency=10), CATALOG)


def test_genai_perf_case_and_its_options(tmp_path: Path):
    options = SystemOptions(accelerator="h100-sxm", model=GPT2, framework="vllm")
    (case,) = ingest_files([GP_VLLM], options, CATALOG)
    assert case["workload"] == {"input_tokens": 200.0, "output_tokens": 115.2, "scenario": "concurrency", "batch": 1}
    assert case["measured"] == {"output_tokens_per_s": 212.04, "ttft_s": 0.02204, "tpot_s": 0.00458}
    assert case["software"]["framework"] == "vllm" and "serving stack vllm from --framework" in case["notes"]
    assert predict_inference_case(as_case(case, "inference"), "output_tokens_per_s", CATALOG) > 0
    with pytest.raises(ClusterSimError, match=r"software\.framework"):
        ingest_files([GP_VLLM], SystemOptions(**{**options.__dict__, "framework": "triton"}), CATALOG)
    with pytest.raises(ClusterSimError, match="--framework applies to genai-perf"):
        ingest_files([TRT], SystemOptions(instance="p5.48xlarge", model="llama3.1-8b", framework="vllm"), CATALOG)
    labelled = tmp_path / "run.txt"
    labelled.write_text("artifacts/gpt2-triton-vllm-concurrency8/profile_export.json\n" + GP_VLLM.read_text())
    assert ingest_files([labelled], options, CATALOG)[0]["workload"]["batch"] == 8
    with pytest.raises(ClusterSimError, match="the artifact path says concurrency 8, --concurrency says 4"):
        ingest_files([labelled], SystemOptions(**{**options.__dict__, "concurrency": 4}), CATALOG)
    rate = tmp_path / "rate.txt"
    rate.write_text("artifacts/gpt2-triton-vllm-request_rate10/profile_export.json\n" + GP_VLLM.read_text())
    with pytest.raises(ClusterSimError, match=r"rate.txt, line 2: a request-rate run \(request_rate10\)"):
        ingest_files([rate], options, CATALOG)


def test_genai_perf_cut_and_malformed_tables(tmp_path: Path):
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join(GP_VLLM.read_text().splitlines()[:-1]) + "\n")
    with pytest.raises(ClusterSimError, match=r"cut.txt, line 11: the table starting on line 1 ends without its"):
        read_genai_perf(cut)
    bad = tmp_path / "bad.txt"
    bad.write_text(GP_VLLM.read_text().replace("212.04", "nan!!"))
    with pytest.raises(ClusterSimError, match=r"bad.txt, line 10: Output token throughput \(per sec\) avg is 'nan!!'"):
        read_genai_perf(bad)
    short = tmp_path / "short.txt"
    short.write_text("\n".join(line for line in GP_VLLM.read_text().splitlines() if "Input sequence" not in line))
    with pytest.raises(ClusterSimError, match=r"short.txt, line 1: the table lacks mean_input_tokens"):
        read_genai_perf(short)


def test_the_cli_names_the_reader_of_each_serving_file(tmp_path: Path):
    out = tmp_path / "cases.jsonl"
    args = ["ingest", str(GP_TRT), str(GP_WRAPPED), "-o", str(out), "--accelerator", "h100-sxm", "--model", GPT2]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    read = json.loads(result.output)["read"]
    assert [(r["reader"], r["cases"]) for r in read] == [("genai-perf", 1), ("genai-perf", 1)]
    assert len(out.read_text().splitlines()) == 2
    printed = runner.invoke(app, args)
    assert f"{GP_TRT}: genai-perf reader, 1 case" in printed.output
    assert [reader_of(p) for p in (TRT, MULTIMODAL, GP_VLLM)] == ["trtllm-bench", "trtllm-bench", "genai-perf"]
