"""Static shapes an engine compiles (``compiled_batch``, ``compiled_sequence_tokens`` in an engine profile):
the token-generation graph computes every slot of its compiled batch whenever one decodes, the single bucket
is the compiled length whatever the requests' lengths, and a request longer than it is refused (optimum-neuron's
benchmarks compile BATCH_SIZE=32, SEQUENCE_LENGTH=4096 for Llama 3.1 8B on trn2, their .env files)."""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import serving_system_for_accelerator, step_times
from clustersim.serving.engines import EngineProfile, engine_profile, engine_profiles, prompt_bucket_tokens
from clustersim.serving.steps import StepTimes
from clustersim.workload.transformer import Transformer

OPTIMUM = engine_profile("optimum-neuron")
COMPILED = OPTIMUM.model_copy(update={"compiled_batch": 32, "compiled_sequence_tokens": 4096})
LLAMA = Transformer(name="llama3.1-8b", layers=32, hidden=4096, ffn_hidden=14336, heads=32, kv_heads=8, vocab=128256)
SYSTEM = serving_system_for_accelerator(load_catalog(use_env=False), "trainium2", tp=4, devices_per_node=64)


def _step(
    engine: EngineProfile, decoding: float, context: float, prompt: float = 0.0, prompt_tokens: float = 1500.0
) -> StepTimes:
    return step_times(
        LLAMA, SYSTEM, Dtype.BF16, Dtype.BF16, decode_sequences=decoding, decode_context_tokens=context,
        prefill_tokens=prompt, prefill_sequences=1.0 if prompt else 0.0, prompt_tokens=prompt_tokens, engine=engine,
    )  # fmt: skip


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 32))
def test_a_compiled_batch_computes_every_slot_and_the_host_serves_the_live_ones(live: int) -> None:
    padded, full = _step(COMPILED, float(live), 1625.0), _step(COMPILED, 32.0, 1625.0)
    assert float(padded.gemm_s) == float(full.gemm_s)
    assert float(padded.decode_attention_s) == float(full.decode_attention_s)
    assert float(padded.overhead_s) <= float(full.overhead_s)
    unpadded = OPTIMUM.model_copy(update={"compiled_sequence_tokens": 4096})
    assert float(padded.step_s) >= float(_step(unpadded, float(live), 1625.0).step_s)


def test_every_decode_attends_over_the_compiled_length_and_every_prompt_pads_to_it() -> None:
    assert prompt_bucket_tokens(1500, COMPILED, 1750) == 4096
    one_slot = COMPILED.model_copy(update={"compiled_batch": 1})
    at_4096 = OPTIMUM.model_copy(update={"compiled_batch": 1})
    # a decode at any position reads what one at the compiled length reads (the one bucket is 4,096 positions)
    assert float(_step(one_slot, 1.0, 1625.0).decode_attention_s) == pytest.approx(
        float(_step(at_4096, 1.0, 4096.0, prompt_tokens=4096.0).decode_attention_s)
    )
    # the prompt's launch: 1,500 tokens priced as the 4,096 the graph runs
    assert float(_step(COMPILED, 0.0, 1500.0, prompt=1500.0).gemm_s) == pytest.approx(
        float(_step(at_4096, 0.0, 4096.0, prompt=4096.0, prompt_tokens=4096.0).gemm_s)
    )


def test_the_compiled_batch_caps_the_sequences_in_flight() -> None:
    assert OPTIMUM.sequence_cap("trainium2") == OPTIMUM.max_batch_sequences
    assert COMPILED.sequence_cap("trainium2") == 32


def test_a_request_longer_than_the_compiled_length_is_refused() -> None:
    with pytest.raises(ClusterSimError, match="longer than the engine's compiled_sequence_tokens 4096"):
        prompt_bucket_tokens(5000, COMPILED, 5200)
    with pytest.raises(ClusterSimError, match="compiled_sequence_tokens 4096") as caught:
        _step(COMPILED, 1.0, 4500.0, prompt_tokens=4000.0)
    assert caught.value.field == "compiled_sequence_tokens"


def test_a_user_profile_sets_the_compiled_shapes(tmp_path: Path) -> None:
    path = tmp_path / "engines.toml"
    path.write_text('[my-optimum]\nbased_on = "optimum-neuron"\ncompiled_batch = 32\ncompiled_sequence_tokens = 4096\n')
    mine = engine_profiles([path], use_env=False)["my-optimum"]
    assert (mine.compiled_batch, mine.compiled_sequence_tokens) == (32, 4096)
    bad = tmp_path / "bad.toml"
    bad.write_text('[bad]\nbased_on = "optimum-neuron"\ncompiled_batch = 0\n')
    with pytest.raises(ClusterSimError, match="compiled_batch"):
        engine_profiles([bad], use_env=False)
