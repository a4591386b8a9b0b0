"""Megatron-Core's pipeline chunks for the embedding and the loss: uneven stages may have up to layers + 2
chunks (account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split), never more."""

from __future__ import annotations

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.execution import PIPELINE_END_CHUNKS, Layout
from clustersim.validation.cases import default_paths, primary_field, read_all
from clustersim.validation.training import predict_training_case
from clustersim.workload.zoo import load_model

# Published runs that give the embedding and the loss a chunk each; no fit has seen them.
END_CHUNK_RUNS = (
    "mbridge2606_llama3.1-405b_gb200_256gpu_tp4_pp16_vp8_mxfp8",  # 126 layers, pp 16 x vp 8 = 128
    "mzoo_qwen3-235b-a22b_h100_256gpu_tp2_pp32_vp3_ep8_bf16_a2a",  # 94 layers, pp 32 x vp 3 = 96
)


def _layout(pp: int, vp: int, *, uneven: bool) -> Layout:
    return Layout(tp=8, pp=pp, vp=vp, dp=1, uneven_stages=uneven)


def test_uneven_stages_take_up_to_two_chunks_beyond_the_layers_and_no_more() -> None:
    model = load_model("llama3.1-405b")  # 126 layers
    assert PIPELINE_END_CHUNKS == 2
    _layout(16, 8, uneven=True).check(model, num_devices=128, global_batch=128, seq_len=8192)
    with pytest.raises(ClusterSimError, match="layers 126 must divide by pp\\*vp = 128"):
        _layout(16, 8, uneven=False).check(model, num_devices=128, global_batch=128, seq_len=8192)
    with pytest.raises(ClusterSimError, match="at most layers \\+ 2 chunks"):
        _layout(16, 9, uneven=True).check(model, num_devices=128, global_batch=144, seq_len=8192)


@pytest.mark.parametrize("case_id", END_CHUNK_RUNS)
def test_the_published_runs_with_end_chunks_are_scored_out_of_sample(case_id: str) -> None:
    (case,) = [c for c in read_all(default_paths("training.jsonl")) if c.id == case_id]
    field = primary_field(case)
    predicted = predict_training_case(case, field, load_catalog(use_env=False))
    assert predicted == pytest.approx(case.measured[field], rel=0.10)
