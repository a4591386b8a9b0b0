"""The step-term registry and the collective-cost seam: a new term or a new network model is one addition."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError, UnknownNameError
from clustersim.execution import Layout
from clustersim.network.cost import ANALYTIC, COST_MODELS, cost_model
from clustersim.system import system_for_instance
from clustersim.training import terms as registry
from clustersim.training.estimate import estimate_training
from clustersim.training.job import TrainingJob
from clustersim.training.terms import STEP_TERMS, TermTimes, step_term
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
MODEL = load_model("llama3-8b", use_env=False)
SYSTEM = system_for_instance(CATALOG, "p5.48xlarge", 2)
JOB = TrainingJob(global_batch=64, seq_len=8192)
LAYOUT = Layout(tp=2, pp=2, dp=4, zero=1, sequence_parallel=True)


def test_the_registered_terms_in_their_order():
    assert [t.name for t in STEP_TERMS] == [
        "forward", "backward", "recompute", "activation offload", "pipeline bubble", "tp comm", "cp comm", "ep comm",
        "pp comm", "dp comm", "optimizer", "framework overhead",
    ]  # fmt: skip


def test_a_new_term_is_one_registration_and_counts_in_the_step_and_the_bottleneck():
    before = estimate_training(MODEL, SYSTEM, LAYOUT, JOB)

    @step_term("checkpoint stall", "checkpoint writes: write asynchronously")
    def _stall(ctx):
        seconds = np.full(len(ctx.lay), 1000.0)
        return TermTimes(seconds, seconds)

    try:
        after = estimate_training(MODEL, SYSTEM, LAYOUT, JOB)
    finally:
        STEP_TERMS.pop()
    assert after.step_s == pytest.approx(before.step_s + 1000.0, rel=1e-12)
    assert after.terms[-1].name == "checkpoint stall" and after.terms[-1].exposed_s == 1000.0
    assert after.bottleneck.startswith("checkpoint writes: write asynchronously (")
    assert [t.name for t in estimate_training(MODEL, SYSTEM, LAYOUT, JOB).terms] == [t.name for t in STEP_TERMS]


def test_a_term_name_registers_once():
    with pytest.raises(ClusterSimError, match="registered twice"):
        step_term("forward", "again")(lambda ctx: None)
    assert registry.bottleneck_words("forward") == "compute (forward pass)"


@dataclass(frozen=True)
class _SlowerNetwork:
    """A stand-in for a simulator: the analytic times scaled."""

    factor: float
    name: str = "slower"

    def time_s(self, op, size_bytes, fabric):
        return self.factor * ANALYTIC.time_s(op, size_bytes, fabric)

    def table(self, op, size_bytes, fabric, *, algorithm=None, protocol=None):
        raise NotImplementedError


def test_the_estimator_prices_every_collective_through_the_cost_interface():
    base = estimate_training(MODEL, SYSTEM, LAYOUT, JOB)
    slow = estimate_training(MODEL, SYSTEM, LAYOUT, JOB, cost=_SlowerNetwork(3.0))
    a, b = ({t.name: t for t in e.terms} for e in (base, slow))
    for name in ("tp comm", "pp comm", "dp comm"):
        assert a[name].link_s > 0
        assert b[name].link_s == pytest.approx(3 * a[name].link_s, rel=1e-12)
    for name in ("forward", "backward", "optimizer"):
        assert b[name].exposed_s == a[name].exposed_s
    assert slow.step_s > base.step_s
    assert slow.to_json()["network_model"] == "slower" and base.to_json()["network_model"] == "analytic"


def test_cost_models_by_name():
    assert cost_model("analytic") is ANALYTIC
    assert set(COST_MODELS) >= {"analytic"}
    with pytest.raises(UnknownNameError, match="unknown network model 'flowsim'"):
        cost_model("flowsim")


def test_tp_communication_advice_keeps_tp_inside_the_scaleup_domain_only_where_it_is_not():
    """Llama 3 8B at 16-way TP, TP-bound either way: over two trn1 (32 chips, past one instance's 16-chip
    NeuronLink domain) the advice is to keep TP inside it; on one trn1, inside already, a smaller TP or overlap."""
    job = TrainingJob(global_batch=4, seq_len=8192)

    def bottleneck(nodes: int, tp: int) -> str:
        system = system_for_instance(CATALOG, "trn1.32xlarge", nodes)
        assert system.scaleup_devices == 16
        return estimate_training(MODEL, system, Layout(tp=tp, dp=1, zero=1, sequence_parallel=True), job).bottleneck

    assert bottleneck(2, 32).startswith("tensor-parallel communication: keep TP inside the scale-up domain or overlap")
    assert bottleneck(1, 16).startswith("tensor-parallel communication, inside the scale-up domain already: a smaller")
