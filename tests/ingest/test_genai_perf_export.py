"""genai-perf's export files (profile_export_genai_perf.csv, .json) read into the ServingRun the console table
gives, on real published CSVs (tests/data/ingest/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.ingest import SystemOptions, ingest_files, reader_of
from clustersim.ingest.genai_perf import ROWS, read_genai_perf, read_genai_perf_export

DATA = Path(__file__).resolve().parents[1] / "data" / "ingest"
DYNAMO = DATA / "genai_perf_export_ai_dynamo_cloudai.csv"
NIM = DATA / "genai_perf_export_deepseek_r1_nim_dgxc.csv"
AIPERF_DOCS = DATA / "aiperf_qwen3_06b_custom_dataset_docs.txt"
GPT2 = str(DATA / "gpt2.toml")
CATALOG = load_catalog(use_env=False)


def test_both_csv_layouts():
    run = read_genai_perf_export(DYNAMO)
    assert run.values == {
        "mean_ttft_ms": 1146.31,
        "mean_tpot_ms": 30.35,
        "mean_output_tokens": 174.45,
        "mean_input_tokens": 3000.05,
        "output_throughput": 261.25,
        "completed": 40.0,
        "max_concurrency": 1,
    }
    assert run.tool == "GenAI-Perf export" and "default 1 assumed" in run.notes[0]
    nim = read_genai_perf_export(NIM, concurrency=1, framework="nim")  # older names: no unit on the lengths
    assert (nim.values["output_throughput"], nim.values["mean_output_tokens"], nim.values["mean_input_tokens"]) == (
        86.48,
        511.90,
        127.50,
    )
    assert "completed" not in nim.values and nim.framework == "nim"
    # at concurrency 1 one stream's rate is 1000 / ITL; the throughput is below it by the TTFT and gaps
    assert nim.values["output_throughput"] < 1000 / nim.values["mean_tpot_ms"]
    assert reader_of(DYNAMO) == reader_of(NIM) == "genai-perf-export"


def test_json_export_shares_the_table_row_names(tmp_path: Path):
    """The JSON genai-perf writes beside the CSV: the same metrics as {unit, avg} objects; built here from the
    published CSV's averages, with the units genai-perf's CSV prints."""
    stats = {
        "time_to_first_token": {"unit": "ms", "avg": 1146.31},
        "inter_token_latency": {"unit": "ms", "avg": 30.35},
        "output_token_throughput": {"unit": "tokens/sec", "avg": 261.25},
        "output_sequence_length": {"unit": "tokens", "avg": 174.45},
        "input_sequence_length": {"unit": "tokens", "avg": 3000.05},
        "input_config": {"concurrency": 8},
    }
    export = tmp_path / "profile_export_genai_perf.json"
    export.write_text(json.dumps(stats, indent=2))
    run = read_genai_perf_export(export)
    csv_values = {k: v for k, v in read_genai_perf_export(DYNAMO).values.items() if k not in ("completed",)}
    assert run.values == {**csv_values, "max_concurrency": 8.0} and "from input_config" in run.notes[0]
    assert all(f"{k.replace('_', ' ')} ({v['unit']})" in ROWS for k, v in stats.items() if "unit" in v)
    with pytest.raises(ClusterSimError, match="input_config says concurrency 8, --concurrency says 4"):
        read_genai_perf_export(export, concurrency=4)
    stats["input_config"] = {"request_rate": 2.0}
    export.write_text(json.dumps(stats))
    with pytest.raises(ClusterSimError, match=r"input_config has request_rate 2\.0: an open loop"):
        read_genai_perf_export(export)
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps(stats, indent=2)[:120])
    with pytest.raises(ClusterSimError, match=r"cut.json, line \d+: the export is cut or broken"):
        read_genai_perf_export(cut)


def test_missing_rows_and_cases(tmp_path: Path):
    lacking = tmp_path / "lacking.csv"
    lacking.write_text("\n".join(line for line in NIM.read_text().splitlines() if "Throughput" not in line))
    with pytest.raises(ClusterSimError, match=r"lacking.csv, line 1: the table lacks output_throughput"):
        read_genai_perf_export(lacking)
    garbled = tmp_path / "garbled.csv"
    garbled.write_text(
        NIM.read_text().replace("Output Token Throughput (per sec),86.48", "Output Token Throughput (per sec),n/a")
    )
    with pytest.raises(ClusterSimError, match=r"line 9: Output Token Throughput \(per sec\) avg is 'n/a'"):
        read_genai_perf_export(garbled)
    with pytest.raises(ClusterSimError, match="give --model"):
        ingest_files([NIM], SystemOptions(instance="p5.48xlarge"), CATALOG)
    (case,) = ingest_files([NIM], SystemOptions(instance="p5.48xlarge", model=GPT2), CATALOG)
    assert case["kind"] == "inference" and case["workload"]["input_tokens"] == 127.50


def test_a_second_aiperf_table_with_three_row_names():
    """AIPerf's newer table wraps a metric's name over three rows ('Output Token / Throughput / (tokens/sec)')
    and keeps 'Output Token Throughput Per User' apart; the concurrency comes from the export paths printed
    under it."""
    (run,) = read_genai_perf(AIPERF_DOCS)
    assert run.values == {
        "mean_ttft_ms": 19.99,
        "mean_tpot_ms": 3.52,
        "mean_output_tokens": 833.40,
        "mean_input_tokens": 5.0,
        "output_throughput": 527.06,
        "completed": 10.0,
        "max_concurrency": 2,
    }
    # two streams at 3.52 ms per token bound the rate at 2 x 284 tokens/s; the measured 527 sits under it
    assert run.values["output_throughput"] < 2 * 1000 / run.values["mean_tpot_ms"]
    assert run.notes[0] == "concurrency 2 from the artifact path" and run.tool == "AIPerf LLM metrics"
