"""Which ranks each collective of the step spans when context parallelism joins the data-parallel ranks,
and what the pipeline bubble waits on: hand derivations on the round device and tiny models of
``test_step_closed_form`` (mutation testing found these unpinned)."""

from __future__ import annotations

import pytest

from clustersim.execution import Layout
from clustersim.network.collectives import Op
from clustersim.network.fabric import Fabric
from tests.training.test_step_closed_form import (
    HBM,
    MOE,
    NVLINK,
    PARAMS,
    REL,
    SW,
    H,
    estimate,
    head_parts,
    node_fabric,
    t_coll,
    terms,
)


def test_zero_3_gathers_over_the_data_and_context_parallel_ranks():
    # dp 1 x cp 2: the two CP ranks hold the same parameters, so ZeRO-3 shards and gathers over both.
    no_prefetch = SW.model_copy(update={"zero3_prefetch": False})
    est = estimate(Layout(cp=2, zero=3), devices=2, global_batch=2, sw=no_prefetch)
    gather = t_coll(Op.ALL_GATHER, PARAMS / 4 * 2, node_fabric(2))
    scatter = t_coll(Op.REDUCE_SCATTER, PARAMS / 4 * 2, node_fabric(2))
    m = 2  # micro-batches: 2 sequences, dp 1
    assert terms(est)["dp comm"] == pytest.approx((m * 4 * (2 * gather + scatter),) * 2, rel=REL)


def test_the_optimizer_shards_its_state_over_the_data_and_context_parallel_ranks():
    est = estimate(Layout(cp=2, zero=1), devices=2, global_batch=2)
    assert terms(est)["optimizer"][1] == pytest.approx(PARAMS / 2 * 30 / HBM, rel=REL)


def test_pipeline_sends_skip_over_the_tensor_context_and_data_parallel_ranks():
    # pp 2 x cp 2 on two nodes of two devices: a stage's partner is cp = 2 ranks away, on the other node,
    # with its share (one of two devices) of the node's network.
    est = estimate(Layout(pp=2, cp=2), devices=4, per_node=2, global_batch=4)
    tokens = 1024 / 2
    hop = t_coll(Op.SENDRECV, tokens * H * 2, Fabric("hand", 1, 2, NVLINK, 25e9, False))
    m = 4
    assert terms(est)["pp comm"] == pytest.approx((m * 2 * hop,) * 2, rel=REL)


def _per_micro_batch(est, name: str, m: int) -> float:
    return terms(est)[name][1] / m


@pytest.mark.parametrize(
    ("layout", "model", "exposed"),
    [
        (Layout(pp=2, cp=2), None, "cp comm"),
        (Layout(pp=2, dp=2, ep=2), MOE, "ep comm"),
    ],
)
def test_the_bubble_waits_on_the_exposed_exchanges_of_a_stage(layout, model, exposed):
    kwargs = {"model": model} if model else {}
    est = estimate(layout, devices=4, global_batch=4, nvlink=1e9, **kwargs)
    m = 4 // layout.dp
    tokens = 1024 / layout.cp
    head_fwd, head_bwd = head_parts(tokens)
    assert _per_micro_batch(est, exposed, m) > 0.01 * _per_micro_batch(est, "forward", m)  # the case this checks
    stage = (
        _per_micro_batch(est, "forward", m)
        + _per_micro_batch(est, "backward", m)
        - head_fwd
        - head_bwd
        + _per_micro_batch(est, exposed, m)
        + _per_micro_batch(est, "pp comm", m)
    )
    assert terms(est)["pipeline bubble"][1] == pytest.approx(stage, rel=1e-9)


def test_leading_dense_layers_send_no_tokens():
    dense_first = MOE.model_copy(update={"dense_layers": 1})
    every = terms(estimate(Layout(dp=2, ep=2), devices=2, global_batch=4, model=MOE))["ep comm"][0]
    fewer = terms(estimate(Layout(dp=2, ep=2), devices=2, global_batch=4, model=dense_first))["ep comm"][0]
    assert fewer == pytest.approx(every * 3 / 4, rel=REL)
