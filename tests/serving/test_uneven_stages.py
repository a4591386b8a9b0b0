"""Serving pipelines whose layers do not divide by ``pp``: engines split them unevenly (some stages a layer more),
and the largest stage sets the step and holds the most weights and cache."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from clustersim.catalog.kinds import Dtype
from clustersim.catalog.registry import load_catalog
from clustersim.cli.app import app
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import serving_system_for_accelerator, step_times
from clustersim.serving.estimate import Request, batch_limit
from clustersim.serving.memory import kv_bytes_per_token, stage_share, weight_bytes_per_device
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
LLAMA_405B = load_model("llama3.1-405b")  # 126 layers
EVEN_128 = LLAMA_405B.model_copy(update={"name": "llama-128", "layers": 128})
ENV = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": ""}


def _step(model, pp: int):
    system = serving_system_for_accelerator(CATALOG, "h200-sxm", tp=2, pp=pp)
    return step_times(
        model, system, Dtype.FP8, Dtype.FP8, decode_sequences=64.0, decode_context_tokens=3000.0,
        prefill_tokens=512.0, prefill_sequences=1.0, prompt_tokens=2000.0,
    )  # fmt: skip


def test_the_largest_stage_holds_the_ceiling_of_the_layers():
    assert stage_share(LLAMA_405B, 2) == pytest.approx(1 / 2)
    assert stage_share(LLAMA_405B, 4) == pytest.approx(32 / 126)
    assert kv_bytes_per_token(LLAMA_405B, Dtype.FP8, tp=8, pp=4) == pytest.approx(
        32 * kv_bytes_per_token(LLAMA_405B, Dtype.FP8, tp=8) / 126
    )
    # the largest stage holds 32 layers of weights and a quarter of the embeddings and logits, as 32 of 128 would
    assert weight_bytes_per_device(LLAMA_405B, Dtype.FP8, pp=4) == pytest.approx(
        weight_bytes_per_device(EVEN_128, Dtype.FP8, pp=4),
        rel=1e-6,  # the norms of two layers more
    )
    assert weight_bytes_per_device(LLAMA_405B, Dtype.FP8, pp=4) > weight_bytes_per_device(LLAMA_405B, Dtype.FP8) / 4


def test_a_stage_of_32_of_126_layers_steps_as_a_stage_of_32_of_128():
    # every layer term of a stage is its layers'; 126 layers over 4 stages price the largest, 32 layers
    uneven, even = _step(LLAMA_405B, 4), _step(EVEN_128, 4)
    for part in ("gemm_compute_s", "decode_attention_s", "prefill_attention_s", "elementwise_s", "overhead_s"):
        assert float(getattr(uneven, part)) == pytest.approx(float(getattr(even, part)), rel=1e-9), part
    # the weights read: 32 layers' either way, and the head's share of the 126-layer model's
    assert float(uneven.gemm_memory_s) == pytest.approx(float(even.gemm_memory_s), rel=1e-3)
    assert float(uneven.step_s) > float(_step(LLAMA_405B, 2).step_s) / 2


def test_a_replica_of_uneven_stages_is_priced_and_says_how_they_split():
    system = serving_system_for_accelerator(CATALOG, "b200", tp=2, pp=4)
    batch, _, _ = batch_limit(LLAMA_405B, system, Request(2000, 500))
    assert batch > 0
    result = CliRunner().invoke(
        app, ["serve", "llama3.1-405b", "--instance", "p6-b200.48xlarge", "--tp", "2", "--pp", "4", "--json"], env=ENV
    )
    assert result.exit_code == 0, result.output
    notes = json.loads(result.stdout)["notes"]
    assert any("126 layers over pp 4: 2 stage(s) of 32 layers and 2 of 31" in note for note in notes)


def test_more_stages_than_layers_are_refused_naming_pp():
    tiny = LLAMA_405B.model_copy(update={"name": "tiny", "layers": 3})
    system = serving_system_for_accelerator(CATALOG, "b200", tp=1, pp=4)
    with pytest.raises(ClusterSimError, match=r"pp 4 exceeds its 3 layers") as err:
        batch_limit(tiny, system, Request(100, 10))
    assert err.value.field == "pp"
