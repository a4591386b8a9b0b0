"""MLPerf Training's Llama 3.1 405B runs (v5.0, NVIDIA on 512-8,192 H100): out of sample, since no Hopper fit has
seen them, each step within 5%, and the per-GPU throughput lost as the cluster grows at one layout."""

from __future__ import annotations

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.validation.cases import default_paths, read_all
from clustersim.validation.manifest import read_manifest
from clustersim.validation.specs import SPECS
from clustersim.validation.training import predict_training_case

H100_405B = "mlperft50_llama3.1-405b_h100-sxm_{}gpu_nvidia_tp8pp8cp2_fp8"
SCALES = (512, 2048, 2432, 2560, 8192)
FIELD = "tokens_per_s_per_device"


@pytest.fixture(scope="module")
def runs() -> dict[int, tuple[float, float]]:
    """Per cluster size: (measured, predicted) tokens/s per GPU."""
    catalog = load_catalog(use_env=False)
    cases = {c.id: c for c in read_all(default_paths("training.jsonl"))}
    out = {}
    for gpus in SCALES:
        case = cases[H100_405B.format(gpus)]
        out[gpus] = (case.measured[FIELD], predict_training_case(case, FIELD, catalog))
    return out


def test_no_hopper_fit_has_seen_them():
    fitted = set(read_manifest(SPECS["training"], use_env=False)["hopper"].fitted_on)
    assert fitted and not {H100_405B.format(gpus) for gpus in SCALES} & fitted


def test_each_step_is_within_5_percent(runs):
    for gpus, (measured, predicted) in runs.items():
        assert predicted == pytest.approx(measured, rel=0.05), gpus


def test_the_throughput_a_gpu_loses_from_512_to_8192_gpus(runs):
    """At TP8 PP8 CP2 the data-parallel degree grows 4 -> 64 while the batch grows only 1,152 -> 1,536 sequences:
    each pipeline runs 288 micro-batches a step at 512 GPUs and 24 at 8,192, so its bubble and its gradient
    reduction weigh more. Measured: 334.3 -> 297.1 tokens/s per GPU (0.889)."""
    measured = runs[8192][0] / runs[512][0]
    predicted = runs[8192][1] / runs[512][1]
    assert measured == pytest.approx(0.889, abs=0.001)
    assert predicted == pytest.approx(measured, abs=0.02)
    ordered = [runs[g][1] for g in SCALES]
    assert ordered == sorted(ordered, reverse=True)  # every step up in scale costs throughput per GPU
