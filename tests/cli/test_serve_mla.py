"""``clustersim serve`` end to end on a latent-attention MoE model read from its config.json (DeepSeek-V3)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from typer.testing import CliRunner

from clustersim.cli.app import app
from tests.workload.hf_configs import DEEPSEEK_V3

runner = CliRunner()


def test_deepseek_v3_on_p5en_sizes_its_kv_cache_by_the_latent(tmp_path: Path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(DEEPSEEK_V3))
    args = ["serve", str(config), "--instance", "p5en.48xlarge", "--precision", "fp8", "--input", "1000"]
    result = runner.invoke(app, [*args, "--output", "1000", "--json"], env={"CLUSTERSIM_CATALOG": ""})
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["tp"], out["dp"], out["kv_precision"]) == (8, 1, "fp8")  # 671B of fp8 weights need all 8 H200s
    # 61 layers x (512 latent + 64 rotary) fp8 bytes, whole on every rank: not 61 x 2 x 16 heads x 192
    assert out["kv_bytes_per_token_per_device"] == 61 * 576
    assert 80e9 < out["weights_bytes_per_device"] < 86e9
    # 2000 tokens reserve 63 blocks of 32: the KV room holds over 500 sequences, but trtllm-bench counts the cache
    # as 128 heads of 56 (25x the latent) and sizes max_batch_size 384 (clustersim.serving.bench_sizing)
    room = math.floor(out["kv_capacity_tokens_per_device"] / 2016)
    assert 500 < room < 1500 and out["max_batch"] == 384 < room and out["batch_limited_by"] == "scheduler"
    assert out["decode_attention_s"] < out["gemm_compute_s"]  # the latent keeps attention reads small


def test_deepseek_v3_does_not_fit_a_p5(tmp_path: Path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(DEEPSEEK_V3))
    args = ["serve", str(config), "--instance", "p5.48xlarge", "--precision", "fp8"]
    result = runner.invoke(app, args, env={"CLUSTERSIM_CATALOG": ""})
    assert result.exit_code == 2
    assert (
        "its weights are fp8 already; or use more instances (--nodes) or an instance with more memory" in result.output
    )
    # two p5 hold it: TP 8 within each, the pipeline's two stages one an instance, its sends on the network
    two = runner.invoke(
        app, [*args, "--nodes", "2", "--tp", "8", "--pp", "2", "--json"], env={"CLUSTERSIM_CATALOG": ""}
    )
    assert two.exit_code == 0, two.output
    payload = json.loads(two.stdout)
    assert (payload["nodes"], payload["tp"], payload["pp"], payload["dp"]) == (2, 8, 2, 1)
    assert payload["weights_bytes_per_device"] < 80 * 2**30 / 1.5
