"""The fast search gives what the slow, plain path gives: every candidate's step time and memory equal one
layout evaluated alone (no masks, no groups, no chunks) to 1e-12, the ranking equal to a full stable sort, and
the layouts that do not fit priced only when asked."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.compute.software import software_for, software_profiles
from clustersim.execution import LayoutArrays, RuleInputs, expert_tp, layout_mask
from clustersim.plan import search
from clustersim.plan.ranking import _k_smallest
from clustersim.plan.search import rank_layouts
from clustersim.plan.space import SearchSpace, _grid, candidate_layouts, distinct_etp
from clustersim.system import system_for_instance
from clustersim.training.estimate import evaluate_layouts
from clustersim.training.job import TrainingJob
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
PROFILES = software_profiles(use_env=False)
CASES = {  # model, instance, nodes, global batch, sequence, framework
    "mt-nlg-530b on 2,240 A100": ("mt-nlg-530b", "p4de.24xlarge", 280, 1920, 2048, None),
    "llama3-70b on 32 H100": ("llama3-70b", "p5.48xlarge", 4, 256, 8192, None),
    "mixtral-8x7b on 128 H100": ("mixtral-8x7b", "p5.48xlarge", 16, 512, 4096, None),
    "llama3-70b on 16 trn2": ("llama3-70b", "trn2.48xlarge", 16, 1024, 4096, None),
    "llama3.1-405b on 1,024 H200, FSDP2": ("llama3.1-405b", "p5en.48xlarge", 128, 512, 32768, "torchtitan"),
}


def _setup(case: str):
    model_id, instance, nodes, batch, seq, framework = CASES[case]
    system = system_for_instance(CATALOG, instance, nodes)
    software = software_for(framework, system.accelerator.family, PROFILES, accelerator=system.accelerator.id)
    return load_model(model_id, use_env=False), system, TrainingJob(batch, seq), software


def _alone(model, system, layouts: LayoutArrays, job, software, index: int) -> tuple[float, float]:
    """Step time and memory of one candidate evaluated by itself, the single-layout path."""
    terms, memory = evaluate_layouts(model, system, LayoutArrays.of([layouts.layout(index)]), job, software=software)
    return float(terms.step_s[0]), float(memory.required[0])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from(sorted(CASES)),
    micro_batch=st.sets(st.sampled_from([1, 2, 3, 4, 8]), min_size=1, max_size=3),
    vp=st.sets(st.sampled_from([1, 2, 3, 4]), min_size=1, max_size=3),
    zero=st.sets(st.sampled_from([0, 1, 2, 3]), min_size=1),
    recompute=st.sets(st.sampled_from(["none", "selective", "full"]), min_size=1),
    headroom=st.sampled_from([0.0, 0.1, 0.3]),
    seed=st.integers(0, 2**16),
)
def test_every_candidate_prices_as_it_does_alone(case, micro_batch, vp, zero, recompute, headroom, seed):
    model, system, job, software = _setup(case)
    space = SearchSpace(
        micro_batch=tuple(sorted(micro_batch)), vp=tuple(sorted(vp)), zero=tuple(sorted(zero)),
        recompute=tuple(sorted(recompute)), headroom=headroom,
    )  # fmt: skip
    try:
        ranking = rank_layouts(model, system, job, space=space, software=software)
    except Exception as exc:  # a space with no legal layout is refused; that is tested elsewhere
        assert "no layout of" in str(exc)
        return
    n = len(ranking.layouts)
    fits = np.flatnonzero(ranking.fits)
    assert len(ranking.fit_step_s) == len(fits)
    rng = np.random.default_rng(seed)
    picks = set(rng.choice(n, size=min(n, 6), replace=False).tolist()) | set(fits[:2].tolist())
    step = ranking.step_s  # prices the layouts that do not fit, too
    for i in sorted(picks):
        alone_step, alone_bytes = _alone(model, system, ranking.layouts, job, software, i)
        assert step[i] == pytest.approx(alone_step, rel=1e-12, abs=0)
        assert ranking.required_bytes[i] == pytest.approx(alone_bytes, rel=1e-12, abs=0)
    # The ranking is a full stable sort with the layouts that do not fit left out.
    everything = np.where(ranking.fits, step, np.inf)
    order = np.argsort(everything, kind="stable")[:7]
    expected = [(ranking.layouts.layout(int(i)), float(everything[i])) for i in order if np.isfinite(everything[i])]
    assert ranking.fastest(7) == expected


def test_the_whole_mt_nlg_space_prices_as_one_vectorized_call_does():
    """The chunked, memory-first path against one unchunked call of the estimator over every candidate."""
    model, system, job, software = _setup("mt-nlg-530b on 2,240 A100")
    space = SearchSpace(tp=(1, 2, 4, 8, 16), vp=(1, 2, 3, 4, 5), micro_batch=(1, 2, 4, 8), sp=(False, True))
    ranking = rank_layouts(model, system, job, space=space, software=software)
    terms, memory = evaluate_layouts(model, system, ranking.layouts, job, software=software)
    assert len(ranking.layouts) > 300 and 0 < ranking.fits.sum() < len(ranking.layouts)
    np.testing.assert_allclose(ranking.step_s, terms.step_s, rtol=1e-12, atol=0)
    np.testing.assert_allclose(ranking.required_bytes, memory.required, rtol=1e-12, atol=0)


@pytest.mark.parametrize("case", ["mixtral-8x7b on 128 H100"])
def test_the_expert_tp_1_candidates_price_as_they_do_alone(case):
    """The MoE search's whole experts (a stated etp 1, where the derived degree is not 1) against the single-layout
    path, one by one, and the whole space against one unchunked call."""
    model, system, job, software = _setup(case)
    ranking = rank_layouts(model, system, job, software=software)
    layouts = ranking.layouts
    stated = np.flatnonzero(layouts.etp_stated == 1)
    derived = np.flatnonzero(layouts.etp_stated == 0)
    assert len(stated) > 100 and len(derived) > 100
    assert (layouts.etp[stated] == 1).all() and (layouts.etp[derived][layouts.tp[derived] > 1] > 1).any()
    # never the same layout twice: a stated 1 only where the derived degree is not 1
    assert (expert_tp(layouts.tp, layouts.cp, layouts.dp, layouts.ep)[stated] != 1).all()
    terms, memory = evaluate_layouts(model, system, layouts, job, software=software)
    np.testing.assert_allclose(ranking.step_s, terms.step_s, rtol=1e-12, atol=0)
    np.testing.assert_allclose(ranking.required_bytes, memory.required, rtol=1e-12, atol=0)
    rng = np.random.default_rng(7)
    fit_stated = np.intersect1d(stated, np.flatnonzero(ranking.fits))
    picks = set(rng.choice(stated, size=6, replace=False).tolist()) | set(fit_stated[:3].tolist())
    for i in sorted(picks):
        assert layouts.layout(i).etp == 1
        alone_step, alone_bytes = _alone(model, system, layouts, job, software, i)
        assert ranking.step_s[i] == pytest.approx(alone_step, rel=1e-12, abs=0)
        assert ranking.required_bytes[i] == pytest.approx(alone_bytes, rel=1e-12, abs=0)


def test_chunks_change_nothing(monkeypatch):
    model, system, job, software = _setup("mixtral-8x7b on 128 H100")
    whole = rank_layouts(model, system, job, software=software)
    chunk = len(whole.fit_step_s) // 3 + 1
    monkeypatch.setattr(search, "CHUNK", chunk)  # three chunks, the last one short
    chunked = rank_layouts(model, system, job, software=software)
    assert 2 * chunk < len(whole.fit_step_s) < 3 * chunk
    np.testing.assert_array_equal(chunked.fit_step_s, whole.fit_step_s)
    assert chunked.fastest(5) == whole.fastest(5)


def test_the_layouts_that_do_not_fit_are_priced_only_when_asked():
    model, system, job, software = _setup("llama3-70b on 32 H100")
    ranking = rank_layouts(model, system, job, software=software)
    assert not ranking.fits.all()
    ranking.fastest(3)
    assert "step_s" not in vars(ranking)  # nothing beyond the layouts that fit was priced
    assert np.isfinite(ranking.step_s).all() and "step_s" in vars(ranking)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.sampled_from([0.5, 1.0, 1.0, 2.0, 3.0, np.inf, np.nan]), max_size=60),
    k=st.integers(1, 70),
)
def test_the_k_smallest_are_those_a_stable_sort_gives(values, k):
    array = np.asarray(values, dtype=float)
    order = np.argsort(array, kind="stable")[:k]
    assert _k_smallest(array, k).tolist() == [int(i) for i in order if np.isfinite(array[i])]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from(sorted(CASES)),
    tp=st.sets(st.sampled_from([1, 2, 4, 8, 16]), min_size=1),
    micro_batch=st.sets(st.sampled_from([1, 2, 3, 4]), min_size=1, max_size=2),
    vp=st.sets(st.sampled_from([1, 2, 3]), min_size=1, max_size=2),
    zero=st.sets(st.sampled_from([0, 1, 2, 3]), min_size=1),
    sp=st.sampled_from([None, (False,), (True,), (False, True)]),
    uneven=st.booleans(),
)
def test_the_open_grid_keeps_what_the_full_grid_and_its_mask_keep_in_the_same_order(
    case, tp, micro_batch, vp, zero, sp, uneven
):
    """The candidates built from the open grid against the plain way: every combination built, then masked."""
    model, system, job, _ = _setup(case)
    space = SearchSpace(
        tp=tuple(sorted(tp)), micro_batch=tuple(sorted(micro_batch)), vp=tuple(sorted(vp)), zero=tuple(sorted(zero)),
        sp=sp, uneven_stages=uneven,
    )  # fmt: skip
    every = _grid(model, system, job, space)
    inputs = RuleInputs(model, system.num_devices, job.global_batch, job.seq_len)
    plain = every.select(layout_mask(every, inputs) & distinct_etp(every))
    fast = candidate_layouts(model, system, job, space)
    for name in (f.name for f in fields(LayoutArrays)):
        np.testing.assert_array_equal(getattr(fast, name), getattr(plain, name), err_msg=name)
        assert getattr(fast, name).dtype == getattr(plain, name).dtype
