"""The neuronx profile on Trainium2: NxD Training's defaults (ZeRO-1, sequence parallelism, selective
recompute, micro-batch 1, LNC=2 ranks), and the ZeRO stages it does not implement refused everywhere a
layout enters: the layout resolver, the estimator and the planner."""

from __future__ import annotations

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.compute.software import resolve_layout, software_for, software_profiles
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout
from clustersim.plan.search import rank_layouts
from clustersim.system import system_for_instance
from clustersim.training.estimate import estimate_training
from clustersim.training.job import TrainingJob
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
PROFILES = software_profiles(use_env=False)
NEURONX = software_for("neuronx", "trainium", PROFILES)


def test_the_default_on_trainium2_is_nxd_trainings_layout():
    _, assumed = resolve_layout({"tp": 32, "pp": 4}, NEURONX)
    assert assumed == {"vp": 1, "cp": 1, "ep": 1, "zero": 1, "sequence_parallel": True, "recompute": "selective",
                       "micro_batch": 1}  # fmt: skip
    assert "hf_llama3_70B_trn2_config.yaml" in NEURONX.layout_source and "lnc 2" in NEURONX.families_source


@pytest.mark.parametrize("zero", [2, 3])
def test_a_zero_stage_nxd_does_not_implement_is_refused_naming_the_field(zero):
    with pytest.raises(ClusterSimError, match=f"neuronx implements ZeRO stages 0, 1, not {zero}") as refused:
        resolve_layout({"tp": 8, "zero": zero}, NEURONX)
    assert (refused.value.field, refused.value.value) == ("zero", zero)


def test_other_frameworks_keep_every_stage():
    for name, profile in PROFILES.items():
        if name not in ("neuronx", "meta"):  # meta: the Llama 3 paper's FSDP, stage 2 only (test_software_meta)
            assert profile.zero_stages is None, name
    fields, _ = resolve_layout({"tp": 8, "zero": 3}, PROFILES["megatron"])
    assert fields["zero"] == 3


def _trn2_job():
    model = load_model("llama3-8b", use_env=False)
    system = system_for_instance(CATALOG, "trn2.48xlarge", 1, devices_per_node=64)
    return model, system, TrainingJob(seq_len=8192, global_batch=64, tokens=1e9)


def test_the_estimator_refuses_fsdp_under_neuronx_and_prices_zero_1():
    model, system, job = _trn2_job()
    fsdp = Layout(tp=16, pp=1, dp=4, zero=3, sequence_parallel=True, micro_batch=1)
    with pytest.raises(ClusterSimError, match="not 3") as refused:
        estimate_training(model, system, fsdp, job, software=NEURONX)
    assert refused.value.field == "zero"
    zero1 = fsdp.model_copy(update={"zero": 1})
    assert estimate_training(model, system, zero1, job, software=NEURONX).step_s > 0


def test_the_planner_never_proposes_a_stage_the_framework_lacks():
    model, system, job = _trn2_job()
    ranking = rank_layouts(model, system, job, software=NEURONX)
    assert set(int(z) for z in ranking.layouts.zero) <= {0, 1}
    megatron_on_trn2 = rank_layouts(model, system, job, software=PROFILES["megatron"])
    assert 3 in set(int(z) for z in megatron_on_trn2.layouts.zero)
