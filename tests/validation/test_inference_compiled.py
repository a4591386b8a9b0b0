"""A case's compiled shapes (``workload.compiled_batch``, ``compiled_sequence_tokens``): copied onto its engine
profile, refused where the workload cannot run in them or the engine compiles none (optimum-neuron's trn2
benchmark compiles BATCH_SIZE=32, SEQUENCE_LENGTH=4096 for Llama 3.1 8B: its .env)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.validation.cases import bundled_dir, project_dir
from clustersim.validation.inference import case_deployment, case_estimate

CATALOG = load_catalog(use_env=False)


def _cases(path: Any) -> dict[str, dict[str, Any]]:
    return {case["id"]: case for case in (json.loads(line) for line in path.read_text().splitlines() if line.strip())}


PROJECT = _cases(project_dir() / "inference.jsonl")
OPTIMUM = PROJECT["optimum_trn2_llama3.1-8b_tp4_c29_in1500_out250"]
BLOG = _cases(bundled_dir() / "inference.jsonl")["trtllm_h200blog_llama2-70b_h200_tp1_bs32_isl2048_osl128"]


def _with(case: dict[str, Any], **workload: Any) -> dict[str, Any]:
    return dict(case, workload={**case["workload"], **workload})


def test_the_stated_shapes_are_the_engine_profiles() -> None:
    engine = case_deployment(OPTIMUM, CATALOG).engine
    assert (engine.compiled_batch, engine.compiled_sequence_tokens) == (32, 4096)
    bare = case_deployment(_with(OPTIMUM, compiled_batch=None, compiled_sequence_tokens=None), CATALOG).engine
    assert (bare.compiled_batch, bare.compiled_sequence_tokens) == (None, None)  # not stated: the profile's


def test_a_padded_prompt_and_batch_cost_time() -> None:
    compiled = case_estimate(OPTIMUM, CATALOG)
    bare = case_estimate(_with(OPTIMUM, compiled_batch=None, compiled_sequence_tokens=None), CATALOG)
    assert compiled.ttft_s > bare.ttft_s  # 1,500 tokens run as the 4,096 compiled
    assert compiled.tpot_s > bare.tpot_s  # 32 slots and 4,096 positions, not 29 and 1,750


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 31))
def test_more_sequences_than_the_compiled_batch_are_refused(compiled: int) -> None:
    case = _with(OPTIMUM, compiled_batch=compiled, batch=compiled + 1)
    with pytest.raises(ClusterSimError, match=r"^case optimum_trn2.*: workload.compiled_batch .*per replica") as info:
        case_deployment(case, CATALOG)
    assert (info.value.field, info.value.value) == ("workload.compiled_batch", compiled)


def test_a_request_longer_than_the_compiled_positions_is_refused() -> None:
    with pytest.raises(ClusterSimError, match=r"1500 input \+ 250 output tokens is longer") as info:
        case_deployment(_with(OPTIMUM, compiled_sequence_tokens=1024), CATALOG)
    assert info.value.field == "workload.compiled_sequence_tokens"


def test_an_engine_without_static_shapes_refuses_them() -> None:
    with pytest.raises(ClusterSimError, match="compiles no static shapes") as info:
        case_deployment(_with(BLOG, compiled_batch=64), CATALOG)
    assert info.value.field == "workload.compiled_batch"


def test_every_neuron_row_with_stated_shapes_runs_within_them() -> None:
    stated = [case for case in PROJECT.values() if case["workload"].get("compiled_batch")]
    assert len(stated) >= 20
    for case in stated:
        engine = case_deployment(case, CATALOG).engine
        assert "trainium" in engine.accelerator_families
        assert engine.compiled_batch == case["workload"]["compiled_batch"]
