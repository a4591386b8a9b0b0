"""Mutation testing of the physics modules with mutmut 3 (not part of the test suite).

Each module group runs in its own snapshot under ``build/mutation/<group>/``: a copy of ``src/`` and
``tests/`` taken when the run starts (others may edit the tree meanwhile), a ``pyproject.toml`` with the
``[tool.mutmut]`` settings below, and a ``shared`` link to the ground truth beside the checkout, so the
validation tests run there as they do here. mutmut copies the snapshot into ``mutants/``, mutates the
group's module, records which tests reach each function, then runs only those tests against each
mutant (``-x``, stopping at the first failure).

Settings and why:

* ``process_isolation = "forkserver"`` with ``forkserver_warmup = "import"`` of third-party modules
  only: a plain fork (or a fork server that collected the tests) would hand every worker what was
  computed with unmutated code: ``lru_cache`` entries (collective candidates per fabric, calibration
  tables), module-level constants (``DEFAULT_CALIBRATION``) and the tests' module-level models and
  systems (``Transformer`` validators ran when the test module was imported). Mutants feeding those
  would survive unseen. So each worker imports clustersim and the tests itself, under its mutant.
* tests: the physics packages (training, compute, network, serving, workload, validation) and the CLI;
  not the catalog loader fuzzers, ruff/mypy or the README (they reach no physics and take seconds each).
* groups in ``GROUP_TESTS`` (the simulators and the fabric step) select only the test files that reach
  their modules, so the three full runs mutmut makes before the first mutant stay short. Every test file that
  imports one of a group's modules by name joins its selection (``importers``, found in the tree when the run
  starts, but those ``LEFT_OUT`` with why), and so do the tests written for its survivors: the hand-kept lists
  name only what reaches a module through others.
* one mutant worker (``--max-children 1``) unless asked for more: the machine is shared.
* ``--hypothesis-seed=0``: the same examples for every mutant, so a verdict is reproducible.
* ``timeout_multiplier = 3``: mutmut stops a mutant after ``2 x multiplier x (its tests' baseline time +
  1 s)`` of CPU time. Its default 15 (30 times the baseline) let each mutant that loops forever (a
  simulator's event that re-arms itself) hold the worker for up to ten minutes; the limit counts CPU
  seconds, which a test run does not inflate when the machine is shared, so six times the baseline still
  leaves every honest run far inside it.
* ``do_not_mutate_patterns``: none; error-message mutants are counted and listed like any other.
* decorated functions: mutmut 3 leaves every decorated function alone (but ``staticmethod`` and
  ``classmethod``), which would hide most of the physics (the ``@step_term`` registry, the
  ``cached_property`` per-micro-batch times, ``property`` totals, ``lru_cache`` tables). In the snapshot
  only, ``undecorate`` rewrites ``@d1 @d2 def f`` into ``def f`` followed by ``f = d1(d2(f))`` (the same
  object, bound the same way), so mutmut reaches them; enum classes and nested functions are left as
  they are.

Run (a long run; best in the background)::

    .venv/bin/python benchmarks/mutation.py                      # every group, one after the other
    .venv/bin/python benchmarks/mutation.py transformer memory   # some groups
    .venv/bin/python benchmarks/mutation.py --report             # print the results recorded so far
    .venv/bin/python benchmarks/mutation.py --recheck nccl_small # its survivors against the tests for them
    .venv/bin/python benchmarks/mutation.py --resume transport_tcp  # an interrupted run, from where it stopped
    nohup .venv/bin/python benchmarks/mutation.py > /tmp/mutmut.log 2>&1 &

It prints, per module, mutants, killed, survived, timeout, other (no tests, suspicious) and the
score ``(killed + timeout) / mutants``, then each survivor with its diff line.
"""

from __future__ import annotations

import argparse
import ast
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

import libcst as cst

ROOT = Path(__file__).resolve().parents[1]
RECHECK_TIMEOUT_S = 300  # one survivor's run against its tests (theirs take seconds): past it, a mutant that hangs
WORK = ROOT / "build" / "mutation"

# Group name -> the physics modules it mutates. Groups others rarely edit come first.
GROUPS: dict[str, list[str]] = {
    "transformer": ["src/clustersim/workload/transformer.py", "src/clustersim/workload/transformer_checks.py"],
    "ops": ["src/clustersim/workload/ops.py"],
    "memory": ["src/clustersim/compute/memory.py"],
    "efficiency": ["src/clustersim/compute/efficiency.py"],
    "collectives": ["src/clustersim/network/collectives.py"],
    "latency": ["src/clustersim/serving/latency.py"],
    "engine": ["src/clustersim/serving/engine.py"],
    "serving_estimate": ["src/clustersim/serving/estimate.py"],
    "whole_prompts": ["src/clustersim/serving/whole_prompts.py"],
    "traces": ["src/clustersim/serving/traces.py", "src/clustersim/serving/routing.py"],
    "training_estimate": ["src/clustersim/training/estimate.py", "src/clustersim/training/job.py"],
    "step": ["src/clustersim/training/step.py"],
    "pricing": ["src/clustersim/training/pricing.py"],
    "attention_kernel": ["src/clustersim/compute/attention_kernel.py"],
    "scan_kernel": ["src/clustersim/compute/scan_kernel.py"],
    "analytic": ["src/clustersim/network/analytic.py"],
    "nccl_small": ["src/clustersim/network/transport/nccl_small.py"],
    "datapath": ["src/clustersim/network/transport/datapath.py"],
    "fabric_step": ["src/clustersim/training/fabric_step.py"],
    "flowsim_groups": ["src/clustersim/network/flowsim/groups.py", "src/clustersim/network/flowsim/cluster.py"],
    "host_launches": ["src/clustersim/training/host_launches.py"],
    "fused_experts": ["src/clustersim/serving/fused_experts.py"],
    "architecture_ops": ["src/clustersim/workload/architecture_ops.py"],
    "linear_attention": ["src/clustersim/workload/linear_attention.py", "src/clustersim/workload/hf_hybrid.py"],
    "moe": ["src/clustersim/workload/moe.py"],
    "bf16_layers": ["src/clustersim/compute/bf16_layers.py", "src/clustersim/training/layer_times.py"],
    "operation_formats": ["src/clustersim/compute/operation_formats.py", "src/clustersim/training/layer_times.py"],
    "serving_memory": ["src/clustersim/serving/memory.py", "src/clustersim/serving/state_pool.py"],
    "interval_lookup": ["src/clustersim/intervals/lookup.py"],
    "interval_layout": ["src/clustersim/intervals/layout.py"],
    "moe_exchange": [
        "src/clustersim/serving/moe_exchange.py",
        "src/clustersim/serving/attention_dp.py",
        "src/clustersim/compute/dispatch.py",
    ],
    "disaggregation": ["src/clustersim/serving/disaggregation.py", "src/clustersim/serving/disaggregated_rate.py"],
    "serving_queues": [
        "src/clustersim/serving/concurrency.py",
        "src/clustersim/serving/queueing.py",
        "src/clustersim/serving/first_token.py",
    ],
    "speculative": ["src/clustersim/serving/speculative.py"],
    "nvls_torus": ["src/clustersim/network/nvls.py", "src/clustersim/network/torus.py"],
    "training_options": [
        "src/clustersim/training/zero3.py",
        "src/clustersim/training/offload.py",
        "src/clustersim/training/recompute_modules.py",
    ],
    "formats": [
        "src/clustersim/compute/precision.py",
        "src/clustersim/workload/float8.py",
        "src/clustersim/workload/quantization.py",
    ],
    "contention": ["src/clustersim/training/contention.py", "src/clustersim/training/background.py"],
    "request_sets": ["src/clustersim/serving/datasets.py", "src/clustersim/serving/sim_requests.py"],
    "network_cost": [
        "src/clustersim/compute/stages.py",
        "src/clustersim/network/cost.py",
        "src/clustersim/network/work.py",
        "src/clustersim/network/fabric.py",
    ],
    "request_sim": ["src/clustersim/serving/sim_scheduler.py"],
    "request_steps": ["src/clustersim/serving/sim_steps.py"],
    "serving_setup": [
        "src/clustersim/serving/reserved_memory.py",
        "src/clustersim/serving/memory_plan.py",
        "src/clustersim/serving/graphs.py",
        "src/clustersim/serving/eager_launches.py",
        "src/clustersim/workload/launches.py",
        "src/clustersim/serving/steps.py",
        "src/clustersim/serving/buckets.py",
        "src/clustersim/serving/bench_sizing.py",
    ],
    "hf_config": [
        "src/clustersim/workload/hf.py",
        "src/clustersim/workload/hf_fields.py",
        "src/clustersim/workload/hf_limits.py",
        "src/clustersim/workload/hf_moe.py",
    ],
    "request_report": ["src/clustersim/serving/sim_report.py", "src/clustersim/serving/rate_grid.py"],
    "serving_formats": ["src/clustersim/serving/formats.py", "src/clustersim/serving/serving_system.py"],
    "storage": [
        "src/clustersim/storage/fsx.py",
        "src/clustersim/storage/layouts.py",
        "src/clustersim/storage/checkpoint.py",
        "src/clustersim/storage/burst.py",
        "src/clustersim/storage/dataload.py",
    ],
    "reliability": [
        "src/clustersim/reliability/failures.py",
        "src/clustersim/reliability/montecarlo.py",
        "src/clustersim/reliability/plan.py",
    ],
    "transport_tcp": [
        "src/clustersim/network/transport/tcp.py",
        "src/clustersim/network/transport/tcp_sack.py",
        "src/clustersim/network/transport/cubic.py",
    ],
    "transport_rdma": [
        "src/clustersim/network/transport/dcqcn.py",
        "src/clustersim/network/transport/rc.py",
        "src/clustersim/network/transport/lossless.py",
        "src/clustersim/network/transport/lossless_path.py",
    ],
    "transport_srd": [
        "src/clustersim/network/transport/srd.py",
        "src/clustersim/network/transport/steady_incast.py",
        "src/clustersim/network/transport/links.py",
        "src/clustersim/network/transport/flows.py",
    ],
    "flowsim_solver": [
        "src/clustersim/network/flowsim/solver.py",
        "src/clustersim/network/flowsim/filling.py",
        "src/clustersim/network/flowsim/blockmin.py",
        "src/clustersim/network/flowsim/adaptive.py",
    ],
    "flowsim_collectives": [
        "src/clustersim/network/flowsim/collectives.py",
        "src/clustersim/network/flowsim/nccl.py",
        "src/clustersim/network/flowsim/nvls.py",
        "src/clustersim/network/flowsim/hierarchical.py",
    ],
    "serving_simulate": ["src/clustersim/serving/simulate.py", "src/clustersim/serving/sim_disaggregated.py"],
}
TRANSPORT_TESTS = [
    "tests/network/transport",
    "tests/cli/test_transport.py",
    "tests/cli/test_transport_rc.py",
    "tests/cli/test_transport_seeds.py",
]
FLOWSIM_TESTS = [
    "tests/network/flowsim",
    "tests/network/test_cluster_bound.py",
    "tests/network/test_collective_table.py",
    "tests/network/test_fabric_calibrated.py",
    "tests/training/test_fabric_step.py",
    "tests/training/test_fabric_step_survivors.py",
    "tests/training/test_background.py",
    "tests/cli/test_fabric.py",
    "tests/cli/test_fabric_pattern.py",
]
TEST_SELECTION = [
    "tests/training",
    "tests/compute",
    "tests/network",
    "tests/serving",
    "tests/workload",
    "tests/validation",
    "tests/cli",
]
SIMULATOR_IMPORTERS = [  # test files that import the simulator, selected since 2026-12-07
    "tests/serving/test_speculative.py",
    "tests/serving/test_speculative_survivors.py",
    "tests/serving/test_routing.py",
    "tests/serving/test_attention_dp.py",
    "tests/serving/test_server_prompt_launches.py",
    "tests/serving/test_simulate_survivors.py",
]
SIMULATOR_TESTS = [  # what reaches the request simulator's steps and scheduler
    "tests/serving/test_request_sim_survivors.py",
    "tests/serving/test_simulate.py",
    "tests/serving/test_simulate_inputs.py",
    "tests/serving/test_admission.py",
    "tests/serving/test_pipeline_sim.py",
    "tests/serving/test_receive_steps.py",
    "tests/serving/test_separate_prefill.py",
    "tests/serving/test_server_queue.py",
    "tests/serving/test_request_spread.py",
    "tests/serving/test_multi_step.py",
    "tests/serving/test_first_token_lag.py",
    "tests/serving/test_traces.py",
    "tests/serving/test_disaggregation.py",
    *SIMULATOR_IMPORTERS,
    "tests/validation/test_finite_runs.py",
]
# Groups whose modules only a few test files reach select those instead: mutmut runs the whole selection
# three times before the first mutant (clean run, coverage of which tests reach each function, forced
# fail) and the snapshot check a fourth, minutes each on a shared machine. The files are every test that
# imports the module or a module built on it (the CLI commands over it included).
GROUP_TESTS: dict[str, list[str]] = {
    "storage": [
        "tests/storage",
        "tests/cli/test_storage.py",
        "tests/cli/test_cli_train_checkpoint.py",
        "tests/training/test_job_failures.py",
        "tests/reliability",
    ],
    "reliability": [
        "tests/reliability",
        "tests/cli/test_reliability.py",
        "tests/training/test_job_failures.py",
        "tests/cli/test_cli_train_checkpoint.py",
    ],
    "serving_simulate": [
        *SIMULATOR_TESTS,
        "tests/serving/test_request_report.py",
        "tests/serving/test_disaggregated_rate.py",
        "tests/cli/test_cli_serve.py",
        "tests/cli/test_serve_sweep.py",
        "tests/cli/test_serve_disaggregate.py",
        "tests/cli/test_validate_latency.py",
    ],
    "transport_tcp": TRANSPORT_TESTS,
    "transport_rdma": TRANSPORT_TESTS,
    "transport_srd": TRANSPORT_TESTS,
    "flowsim_solver": FLOWSIM_TESTS,
    "flowsim_collectives": FLOWSIM_TESTS,
    "hf_config": [
        "tests/workload/test_hf.py",
        "tests/workload/test_hf_moe_2025.py",
        "tests/workload/test_context_and_quantization.py",
        "tests/workload/test_kv_cache_elements.py",
        "tests/workload/test_architecture_ops.py",
        "tests/serving/test_mxfp4_experts.py",
        "tests/serving/test_kv_cache.py",
    ],
    "serving_formats": ["tests/serving", "tests/cli/test_cli_serve.py"],
    "request_report": [  # not the simulator's own runs (test_simulate.py): minutes a mutant, and no figure counted
        "tests/serving/test_request_report.py",
        "tests/serving/test_simulate_inputs.py",
        "tests/cli/test_serve_sweep.py",
    ],
    "speculative": [
        "tests/serving/test_speculative.py",
        "tests/serving/test_linear_attention_serving.py",
        "tests/serving/test_neuron_context_buckets.py",
        "tests/cli/test_serve_speculative.py",
    ],
    "nvls_torus": [
        "tests/network/test_nvl72.py",
        "tests/network/test_torus.py",
        "tests/network/test_torus_ultraserver.py",
        "tests/network/test_analytic.py",
        "tests/network/test_analytic_closed_form.py",
        "tests/network/test_scaleup_labels.py",
        "tests/network/flowsim/test_collectives.py",
        "tests/network/flowsim/test_hierarchical.py",
        "tests/training/test_step_systems.py",
    ],
    "training_options": [
        "tests/training/test_estimate.py",
        "tests/training/test_step_closed_form.py",
        "tests/training/test_step_groups.py",
        "tests/training/test_recompute_modules.py",
        "tests/training/test_activation_offload.py",
        "tests/training/test_terms.py",
        "tests/plan/test_search_module_sets.py",
    ],
    "formats": [
        "tests/compute/test_precision.py",
        "tests/workload/test_float8.py",
        "tests/workload/test_context_and_quantization.py",
        "tests/workload/test_hf_moe_2025.py",
        "tests/validation/test_float8_recipe_field.py",
        "tests/validation/test_float8_recipe_effect.py",
        "tests/serving/test_mxfp4_experts.py",
        "tests/serving/test_fp4.py",
        "tests/training/test_operation_formats.py",
        "tests/training/test_bf16_layers.py",
    ],
    "request_sets": [
        "tests/serving/test_request_sets_survivors.py",
        "tests/serving/test_datasets.py",
        "tests/serving/test_simulate_inputs.py",
        "tests/serving/test_request_spread.py",
        "tests/serving/test_traces.py",
        "tests/validation/test_inference_datasets.py",
        "tests/cli/test_cli_datasets.py",
    ],
    "network_cost": [
        "tests/compute/test_stages.py",
        "tests/network/test_cost.py",
        "tests/network/test_analytic.py",
        "tests/network/test_nvl72.py",
        "tests/network/test_fabric_calibrated.py",
        "tests/network/flowsim/test_work.py",
        "tests/network/transport/test_work.py",
        "tests/training/test_step_closed_form.py",
        "tests/training/test_step_systems.py",
        "tests/compute/test_memory_closed_form.py",
    ],
    "contention": [
        "tests/training/test_contention_survivors.py",
        "tests/training/test_contention.py",
        "tests/training/test_background.py",
        "tests/cli/test_train_background.py",
        "tests/report/test_report_background.py",
    ],
    "request_sim": SIMULATOR_TESTS,
    "request_steps": SIMULATOR_TESTS,
    "serving_setup": [  # not test_neuron_engines.py: 46 s a run, its buckets reached by the two bucket files
        "tests/serving/test_kv_cache.py",
        "tests/serving/test_reserved_memory.py",
        "tests/serving/test_neuron_buckets.py",
        "tests/serving/test_neuron_context_buckets.py",
        "tests/serving/test_bench_sizing.py",
        "tests/serving/test_graphs.py",
        "tests/serving/test_eager_launches.py",
        "tests/serving/test_server_prompt_launches.py",
        "tests/serving/test_engine.py",
        "tests/serving/test_engines.py",
        "tests/serving/test_engine_constants.py",
        "tests/serving/test_compiled_shapes.py",
        "tests/cli/test_serve_mla.py",
    ],
    "nccl_small": ["tests/network/transport", "tests/cli/test_transport.py"],
    "whole_prompts": [
        "tests/serving/test_whole_prompts.py",
        "tests/serving/test_multi_step.py",
        "tests/serving/test_closed_form.py",
        "tests/serving/test_simulate.py",
    ],
    "traces": [
        "tests/serving/test_traces.py",
        "tests/serving/test_routing.py",
        "tests/serving/test_simulate_inputs.py",
    ],
    "latency": [
        "tests/serving/test_server_queue.py",
        "tests/serving/test_closed_form.py",
        "tests/serving/test_first_token_lag.py",
        "tests/serving/test_multi_step.py",
        "tests/serving/test_request_spread.py",
        "tests/serving/test_after_first_token.py",
        "tests/serving/test_engine.py",
        "tests/serving/test_pipeline_sim.py",
        "tests/plan/test_serving_plan.py",
    ],
    "datapath": ["tests/network/transport", "tests/cli/test_transport.py"],
    "fabric_step": ["tests/training/test_fabric_step.py", "tests/cli/test_fabric.py"],
    "pricing": ["tests/compute", "tests/training", "tests/validation/test_recipe_kernels.py"],
    "attention_kernel": ["tests/compute/test_attention_softmax.py", "tests/serving/test_prefill_exponentials.py"],
    "scan_kernel": ["tests/compute/test_scan_kernel.py"],
    "flowsim_groups": ["tests/network/flowsim", "tests/training/test_fabric_step.py", "tests/cli/test_fabric.py"],
    "host_launches": ["tests/training/test_host_launches.py", "tests/cli/test_explain.py"],
    "fused_experts": ["tests/serving/test_fused_experts.py"],
    "serving_memory": [
        "tests/serving/test_kv_cache.py",
        "tests/serving/test_serving_memory_survivors.py",
        "tests/serving/test_linear_attention_serving.py",
        "tests/serving/test_reserved_memory.py",
        "tests/serving/test_closed_form.py",
        "tests/serving/test_attention_dp.py",
        "tests/serving/test_fp4.py",
        "tests/serving/test_mxfp4_experts.py",
        "tests/serving/test_uneven_stages.py",
        "tests/workload/test_mamba_hybrid.py",
        "tests/workload/test_context_and_quantization.py",
    ],
    "interval_lookup": [
        "tests/intervals",
        "tests/validation/test_run_intervals.py",
        "tests/serving/test_attention_dp.py",
    ],
    "interval_layout": ["tests/intervals", "tests/diagnose/test_gap.py"],
    "moe_exchange": [
        "tests/serving/test_moe_exchange_survivors.py",
        "tests/serving/test_moe_exchange.py",
        "tests/serving/test_attention_dp.py",
        "tests/training/test_moe_dispatch.py",
        "tests/training/test_fabric_step_survivors.py",
        "tests/validation/test_case_counting.py",
    ],
    "disaggregation": [
        "tests/serving/test_disaggregation_survivors.py",
        "tests/serving/test_disaggregation.py",
        "tests/serving/test_disaggregated_rate.py",
        "tests/cli/test_serve_disaggregate.py",
    ],
    "serving_queues": [
        "tests/serving/test_serving_queues_survivors.py",
        "tests/serving/test_admission.py",
        "tests/serving/test_concurrency.py",
        "tests/serving/test_pipeline_sim.py",
        "tests/serving/test_server_queue.py",
        "tests/serving/test_simulate.py",
        "tests/serving/test_closed_form.py",
        "tests/serving/test_first_token_lag.py",
        "tests/validation/test_finite_runs.py",
        "tests/validation/test_latency_sim.py",
    ],
    "architecture_ops": [
        "tests/workload",
        "tests/training/test_fp8_param_gather.py",
        "tests/validation/test_gpt_oss_kernels.py",
    ],
    "linear_attention": [
        "tests/workload/test_linear_attention.py",
        "tests/workload/test_mamba_hybrid.py",
        "tests/serving/test_linear_attention_serving.py",
    ],
    "moe": ["tests/workload", "tests/training/test_moe_dispatch.py"],
    "bf16_layers": [
        "tests/training/test_bf16_layers.py",
        "tests/training/test_fp8_param_gather.py",
        "tests/validation/test_recipe_kernels.py",
    ],
    "operation_formats": [
        "tests/training/test_operation_formats.py",
        "tests/training/test_bf16_layers.py",
        "tests/training/test_layer_times.py",
        "tests/training/test_fp8_param_gather.py",
        "tests/validation/test_recipe_kernels.py",
        "tests/training/test_moe_dispatch.py",
    ],
}
# Slow tests left out of the selection (a surviving mutant runs every selected test that reaches it): the
# CLI fuzzer (about 40 s), the calibration scripts' write paths (they run the fitting scripts, which the
# snapshot does not carry), the validate command scoring all bundled cases (the same scoring as
# test_bundled_cases_score_with_the_real_models, through the CLI), and the import-time check of the CLI.
SLOW_TESTS = [
    "tests/cli/test_fuzz.py",
    "tests/cli/test_startup.py",
    "tests/compute/test_efficiency.py::test_the_calibration_script_writes_what_it_fitted",
    "tests/network/test_calibration.py::test_the_calibration_script_writes_what_it_fitted",
    "tests/serving/test_calibration.py::test_the_calibration_script_writes_what_it_fitted",
    "tests/validation/test_run.py::test_cli_without_files_scores_the_bundled_ground_truth",
]
STATUS = {
    1: "killed",
    3: "killed",
    0: "survived",
    5: "no tests",
    33: "no tests",
    34: "skipped",
    36: "timeout",
    -24: "timeout",
    24: "timeout",
    152: "timeout",
    # mutmut reads 255 as a timeout, but its fork-server worker exits with -1 (255) when the test run
    # raises, and a real CPU or wall timeout is SIGXCPU (-24). A run that raises is a mutant that keeps
    # the selected tests from even being collected (a model the test module builds fails): killed.
    255: "killed",
    37: "caught by type check",
}


def _toml_list(values: list[str]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


PYTEST_ARGS = ["--hypothesis-seed=0", "-n", "0", "-p", "no:cacheprovider"]  # one process: mutmut runs many small suites
PRELOAD_FILE = "mutmut_preload.txt"
TIMEOUT_MULTIPLIER = 3.0  # see the module docstring
# What the fork server imports once: third-party modules only (see the module docstring).
PRELOAD = ["numpy", "numpy.typing", "pydantic", "pydantic.dataclasses", "hypothesis", "hypothesis.strategies"]
PRELOAD += ["pytest", "typer", "typer.testing", "click", "rich", "rich.console", "rich.table", "tomllib"]


# Test files that import a group's module but stay out of its selection, with why.
LEFT_OUT: dict[str, dict[str, str]] = {
    "request_report": {
        "tests/serving/test_simulate.py": "the simulator's own runs: minutes a mutant, no report figure"
    },
}


def _module_name(path: str) -> str:
    """``src/clustersim/serving/simulate.py`` -> ``clustersim.serving.simulate``."""
    return ".".join(Path(path).with_suffix("").parts[1:])


def _imported_names(test_file: Path) -> set[str]:
    """The dotted names a test file imports: each module, and each ``from`` module's members as ``module.name``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(test_file.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@functools.cache
def _test_imports() -> dict[str, frozenset[str]]:
    """Every test file of the tree (relative path, sorted) and the names it imports, read once per process."""
    files = sorted((ROOT / "tests").rglob("test_*.py"))
    return {t.relative_to(ROOT).as_posix(): frozenset(_imported_names(t)) for t in files}


def importers(group: str) -> list[str]:
    """The test files that import one of ``group``'s modules by name (``from clustersim.serving import simulate``
    included), found in the tree: what a hand-kept selection drifts from as tests are added."""
    modules = {_module_name(m) for m in GROUPS[group]}
    return [test for test, names in _test_imports().items() if names & modules]


def _within(test_file: str, paths: Sequence[str]) -> bool:
    return any(test_file == p or test_file.startswith(p.rstrip("/") + "/") for p in paths)


def _selection(group: str) -> list[str]:
    """The group's chosen tests (``GROUP_TESTS``, else ``TEST_SELECTION``), the tests written for its survivors, and
    every test file that imports one of its modules (but those ``LEFT_OUT``)."""
    chosen = list(GROUP_TESTS.get(group, TEST_SELECTION))
    left_out = LEFT_OUT.get(group, {})
    for test_file in [*SURVIVOR_TESTS.get(group, []), *importers(group)]:
        if not _within(test_file, chosen) and test_file not in left_out:
            chosen.append(test_file)
    return chosen


def _pyproject(group: str, deselect: list[str]) -> str:
    # a test that fails is deselected; a file that does not even collect is ignored
    args = PYTEST_ARGS + [f"--deselect={t}" for t in SLOW_TESTS]
    args += [f"--deselect={t}" if "::" in t else f"--ignore={t}" for t in deselect]
    return "\n".join(
        [
            "[tool.pytest.ini_options]",
            'testpaths = ["tests"]',
            "",
            "[tool.mutmut]",
            'source_paths = ["src"]',
            f"only_mutate = {_toml_list(GROUPS[group])}",
            f"pytest_add_cli_args_test_selection = {_toml_list(_selection(group))}",
            f"pytest_add_cli_args = {_toml_list(args)}",
            'process_isolation = "forkserver"',
            'forkserver_warmup = "import"',
            f'preload_modules_file = "{PRELOAD_FILE}"',
            "use_git_change_detection = false",
            f"timeout_multiplier = {TIMEOUT_MULTIPLIER}",
            "",
        ]
    )


def snapshot(group: str) -> Path:
    """A fresh copy of the tree for ``group``; earlier results of the group are dropped."""
    work = WORK / group
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".hypothesis", ".pytest_cache")
    shutil.copytree(ROOT / "src", work / "src", ignore=ignore)
    shutil.copytree(ROOT / "tests", work / "tests", ignore=ignore)
    for module in GROUPS[group]:
        path = work / module
        path.write_text(undecorate(path.read_text()))
    shared = ROOT.parent / "shared"
    # Tests find the ground truth at parents[3] / "shared": the group's folder for mutants/tests/x/y.py,
    # build/mutation for the check of the snapshot itself (tests/x/y.py).
    for folder in (work, WORK):
        if shared.exists() and not (folder / "shared").exists():
            (folder / "shared").symlink_to(shared)
    (work / PRELOAD_FILE).write_text("\n".join(PRELOAD) + "\n")
    (work / "pyproject.toml").write_text(_pyproject(group, []))
    failing = _failing_tests(work, _selection(group))
    if failing:  # others edit the tree meanwhile: a test red before any mutation cannot judge a mutant
        print(f"   deselected, failing on the unmutated snapshot: {', '.join(failing)}", flush=True)
        (work / "pyproject.toml").write_text(_pyproject(group, failing))
    return work


def _failing_tests(work: Path, selection: list[str]) -> list[str]:
    """Tests of the selection that fail on the snapshot as it is (its own ``src`` first on the path)."""
    env = {**os.environ, "PYTHONPATH": str(work / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("CLUSTERSIM_EFFICIENCY", None)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rfE",
            "--continue-on-collection-errors",
            *PYTEST_ARGS,
            *selection,
            *(f"--deselect={t}" for t in SLOW_TESTS),
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return sorted({line.split()[1] for line in result.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))})


class _Undecorate(cst.CSTTransformer):
    """``@d1 @d2 def f`` -> ``def f`` and ``f = d1(d2(f))``, at module level and in (non-enum) class bodies."""

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        return updated.with_changes(body=_split(updated.body))

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        bases = {cst.Module([]).code_for_node(b.value) for b in updated.bases}
        if any("Enum" in b for b in bases) or not isinstance(updated.body, cst.IndentedBlock):
            return updated
        return updated.with_changes(body=updated.body.with_changes(body=_split(updated.body.body)))


def _split(body: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
    out: list[cst.BaseStatement] = []
    for statement in body:
        plain = {"staticmethod", "classmethod"}
        decorators = statement.decorators if isinstance(statement, cst.FunctionDef) else ()
        if not decorators or all(isinstance(d.decorator, cst.Name) and d.decorator.value in plain for d in decorators):
            out.append(statement)
            continue
        assert isinstance(statement, cst.FunctionDef)
        name = statement.name.value
        wrapped: cst.BaseExpression = cst.Name(name)
        for decorator in reversed(decorators):
            wrapped = cst.Call(func=decorator.decorator, args=[cst.Arg(wrapped)])
        out.append(statement.with_changes(decorators=()))
        out.append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], wrapped)]))
    return out


def undecorate(source: str) -> str:
    """The module with its decorated top-level functions and methods rewritten as plain assignments."""
    return cst.parse_module(source).visit(_Undecorate()).code


def resumed(group: str) -> Path:
    """``group``'s snapshot as an earlier run left it, its mutmut settings brought up to date (mutmut keeps
    every verdict but the timeouts when only the timeout changed); a fresh snapshot where there is none."""
    work = WORK / group
    if not (work / "mutants").exists():
        return snapshot(group)
    lines = (work / "pyproject.toml").read_text().splitlines()
    kept = [line for line in lines if not line.startswith("timeout_multiplier")]
    (work / "pyproject.toml").write_text("\n".join([*kept, f"timeout_multiplier = {TIMEOUT_MULTIPLIER}", ""]))
    return work


def run_group(group: str, max_children: int, resume: bool = False) -> None:
    work = resumed(group) if resume else snapshot(group)
    start = time.monotonic()
    log = work / "mutmut.log"
    print(f"== {group}: mutmut run in {work} (log {log})", flush=True)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("CLUSTERSIM_EFFICIENCY", None)
    with log.open("w") as out:
        code = subprocess.call(
            [sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children)],
            cwd=work,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    elapsed = time.monotonic() - start
    summary = {**collect(group), "elapsed_s": elapsed, "mutmut_exit_code": code}
    (work / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"   {group}: {elapsed / 60:.1f} min, mutmut exit {code}", flush=True)


class RunSummary(TypedDict):
    """One group's run as ``collect`` reads it."""

    group: str
    modules: dict[str, dict[str, int]]
    survivors: list[dict[str, str]]


def collect(group: str) -> RunSummary:
    """Per-module counts and the survivors (with their diff) of one group's finished run."""
    work = WORK / group
    modules: dict[str, dict[str, int]] = {}
    survivors: list[dict[str, str]] = []
    for module in GROUPS[group]:
        meta = work / "mutants" / (module + ".meta")
        counts = {"mutants": 0, "killed": 0, "survived": 0, "timeout": 0, "other": 0}
        if meta.exists():
            codes = json.loads(meta.read_text())["exit_code_by_key"]
            for name, code in sorted(codes.items()):
                status = STATUS.get(code, "suspicious") if code is not None else "not checked"
                counts["mutants"] += 1
                key = status if status in ("killed", "survived", "timeout") else "other"
                counts[key] += 1
                if key != "killed" and key != "timeout":
                    survivors.append(
                        {"module": module, "mutant": name, "status": status, "diff": _diff(work, name, module)}
                    )
        modules[module] = counts
    return {"group": group, "modules": modules, "survivors": survivors}


def _diff(work: Path, mutant: str, module: str) -> str:
    """The changed lines of a mutant (as ``mutmut show`` prints them), without the file headers; read in
    this process (a ``mutmut show`` per survivor takes seconds each)."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    here = os.getcwd()
    os.chdir(work)
    try:
        shown = get_diff_for_mutant(mutant, path=module)
    except Exception:
        shown = subprocess.run(
            [sys.executable, "-m", "mutmut", "show", mutant], capture_output=True, text=True, check=False
        ).stdout
    finally:
        os.chdir(here)
    lines = [
        line
        for line in shown.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---")) and line[1:].strip()
    ]
    return " | ".join(line.strip() for line in lines)


# The tests that reach a layer's blended formats (BF16 layers, operation formats) from every side.
LAYER_BLEND_TESTS = [
    "tests/training/test_bf16_layers.py",
    "tests/training/test_layer_times.py",
    "tests/training/test_activation_offload.py",
    "tests/training/test_estimate.py",
    "tests/training/test_moe_dispatch.py",
    "tests/training/test_step_closed_form.py",
    "tests/training/test_host_launches.py",
    "tests/training/test_fabric_step.py",
    "tests/validation/test_float8_recipe_effect.py",
    "tests/validation/test_gpt_oss_kernels.py",
]

# Tests written to kill a group's survivors (``--recheck`` runs each survivor against them).
SURVIVOR_TESTS: dict[str, list[str]] = {
    "reliability": [
        "tests/reliability/test_failures_survivors.py",
        "tests/reliability/test_montecarlo_plan_survivors.py",
    ],
    "storage": [
        "tests/storage/test_fsx_checks_survivors.py",
        "tests/storage/test_fsx_rates_survivors.py",
        "tests/storage/test_checkpoint_survivors.py",
        "tests/storage/test_burst_survivors.py",
        "tests/storage/test_dataload_survivors.py",
    ],
    "nccl_small": ["tests/network/transport/test_nccl_small_survivors.py"],
    "datapath": ["tests/network/transport/test_datapath_survivors.py"],
    "transport_tcp": ["tests/network/transport/test_tcp_survivors.py"],
    "transport_rdma": [
        "tests/network/transport/test_rdma_survivors.py",
        "tests/network/transport/test_rc_survivors.py",
        "tests/network/transport/test_lossless_path_survivors.py",
    ],
    "transport_srd": [
        "tests/network/transport/test_srd_survivors.py",
        "tests/network/transport/test_links_survivors.py",
    ],
    "flowsim_solver": [
        "tests/network/flowsim/test_solver_survivors.py",
        "tests/network/flowsim/test_routing_variants.py",
    ],
    "flowsim_collectives": [
        "tests/network/flowsim/test_collectives.py",
        "tests/network/flowsim/test_hierarchical.py",
    ],
    # the run of 2026-12-07 selected its tests before SIMULATOR_IMPORTERS joined them: they judge it too
    "serving_simulate": [
        *SIMULATOR_IMPORTERS,
        "tests/serving/test_replica_engine.py",
        "tests/serving/test_simulate_refusals.py",
    ],
    "ops": ["tests/workload/test_ops_survivors.py"],
    "fabric_step": ["tests/training/test_fabric_step_survivors.py"],
    "architecture_ops": ["tests/workload/test_architecture_ops.py"],
    "whole_prompts": ["tests/serving/test_whole_prompts_survivors.py"],
    "latency": ["tests/serving/test_latency_survivors.py"],
    "moe": ["tests/workload/test_latent_moe.py"],
    "scan_kernel": ["tests/compute/test_scan_kernel.py"],
    "host_launches": ["tests/training/test_host_launches.py"],
    "bf16_layers": LAYER_BLEND_TESTS,
    "operation_formats": ["tests/training/test_operation_formats.py", *LAYER_BLEND_TESTS],
    "linear_attention": [
        "tests/workload/test_hf_hybrid_survivors.py",
        "tests/workload/test_hf_nemotron_survivors.py",
        "tests/workload/test_linear_attention.py",
        "tests/workload/test_mamba_hybrid.py",
    ],
    "serving_memory": ["tests/serving/test_serving_memory_survivors.py"],
    "interval_lookup": ["tests/intervals/test_lookup_survivors.py", "tests/intervals/test_lookup.py"],
    "interval_layout": ["tests/intervals/test_lookup.py"],
    "serving_queues": ["tests/serving/test_serving_queues_survivors.py"],
    "moe_exchange": ["tests/serving/test_moe_exchange_survivors.py"],
    "disaggregation": ["tests/serving/test_disaggregation_survivors.py"],
    "speculative": ["tests/serving/test_speculative_survivors.py", "tests/serving/test_speculative.py"],
    "nvls_torus": ["tests/network/test_torus_survivors.py", "tests/network/test_torus.py"],
    "training_options": ["tests/training/test_training_options_survivors.py"],
    "formats": ["tests/compute/test_formats_survivors.py"],
    "serving_setup": ["tests/serving/test_serving_setup_survivors.py"],
    "contention": ["tests/training/test_contention_survivors.py", "tests/training/test_background.py"],
    "request_sim": SIMULATOR_TESTS[:2],  # the survivor tests and the simulator's own
    "request_steps": SIMULATOR_TESTS[:2],
    "hf_config": ["tests/workload/test_hf_config_survivors.py", "tests/workload/test_hf.py"],
    "request_report": ["tests/serving/test_request_report.py", "tests/serving/test_simulate_inputs.py"],
    "request_sets": ["tests/serving/test_request_sets_survivors.py", "tests/serving/test_datasets.py"],
    "serving_formats": ["tests/serving/test_serving_formats_survivors.py", "tests/serving/test_fp4.py"],
    "network_cost": [  # the NeuronLink tests reach the torus's shape, which the group's first selection left out
        "tests/network/test_network_cost_survivors.py",
        "tests/network/test_torus.py",
        "tests/network/test_torus_survivors.py",
        "tests/network/test_torus_ultraserver.py",
        "tests/network/test_cost.py",
    ],
}


def _tests_fingerprint(tests: list[str]) -> str:
    """What a recheck's verdicts hold for: the survivor tests' names and contents."""
    digest = hashlib.sha256()
    for test in tests:
        digest.update(test.encode() + b"\0" + (ROOT / test).read_bytes() + b"\0")
    return digest.hexdigest()


def recheck(group: str) -> None:
    """Run each survivor of ``group``'s recorded run against the group's ``SURVIVOR_TESTS`` (copied from
    the tree into the run's ``mutants/``), one fresh interpreter per survivor, the mutant chosen as
    mutmut does (``MUTANT_UNDER_TEST``); records the verdicts in ``recheck.json`` after each one. A recheck
    stopped part way goes on from its verdicts when the tests are the same files with the same contents
    (``fingerprint``); any edit to them judges every survivor again."""
    work = WORK / group
    mutants = work / "mutants"
    tests = SURVIVOR_TESTS.get(group, [])
    missing = [t for t in tests if not (ROOT / t).exists()]
    if missing:
        raise SystemExit(f"{group}: SURVIVOR_TESTS names files that do not exist: {', '.join(missing)}")
    if not tests or not (work / "summary.json").exists():
        print(f"{group}: nothing to recheck (no survivor tests or no recorded run)")
        return
    for test in tests:
        shutil.copyfile(ROOT / test, mutants / test)
    env = {**os.environ, "PYTHONPATH": str(mutants / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("CLUSTERSIM_EFFICIENCY", None)
    # the tree moves on while the run was recorded: a test red on the unmutated snapshot judges nothing
    base = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfE", *PYTEST_ARGS, *tests],
        cwd=mutants,
        env={**env, "MUTANT_UNDER_TEST": ""},
        capture_output=True,
        text=True,
        check=False,
    )
    red = sorted({line.split()[1] for line in base.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))})
    if red:
        print(f"   deselected, failing on the unmutated snapshot: {', '.join(red)}", flush=True)
    fingerprint = _tests_fingerprint(tests)
    record = work / "recheck.json"
    earlier = json.loads(record.read_text()) if record.exists() else {}
    same = earlier.get("fingerprint") == fingerprint and earlier.get("deselected") == red
    verdicts: dict[str, str] = dict(earlier.get("verdicts", {})) if same else {}
    if verdicts:
        print(f"   going on from {len(verdicts)} verdicts under the same tests", flush=True)
    for survivor in collect(group)["survivors"]:
        if survivor["status"] != "survived":  # a run stopped early leaves mutants not checked: none to recheck
            continue
        name = survivor["mutant"]
        if name in verdicts:
            continue
        try:
            code = subprocess.call(
                [sys.executable, "-m", "pytest", "-x", "-q", *PYTEST_ARGS, *tests, *(f"--deselect={t}" for t in red)],
                cwd=mutants,
                env={**env, "MUTANT_UNDER_TEST": name},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=RECHECK_TIMEOUT_S,
            )
            # 1: a test failed; 2: the test module did not even import under the mutant (killed too)
            verdicts[name] = "killed" if code in (1, 2) else ("survived" if code == 0 else f"exit {code}")
        except subprocess.TimeoutExpired:  # a mutant that never ends (a clock that does not move): as mutmut counts it
            verdicts[name] = "timeout"
        print(f"  {name}: {verdicts[name]}", flush=True)
        record.write_text(
            json.dumps({"tests": tests, "fingerprint": fingerprint, "deselected": red, "verdicts": verdicts}, indent=1)
        )
    killed = sum(v in ("killed", "timeout") for v in verdicts.values())
    print(f"{group}: {killed} of {len(verdicts)} survivors killed by {', '.join(tests)}")


def report(groups: list[str]) -> None:
    rows: list[tuple[str, dict[str, int]]] = []
    survivors: list[dict[str, str]] = []
    for group in groups:
        path = WORK / group / "summary.json"
        if not path.exists():
            print(f"{group}: no results yet")
            continue
        summary = json.loads(path.read_text())
        if summary["survivors"] or any(c["timeout"] for c in summary["modules"].values()):
            summary = {**summary, **collect(group)}  # read the verdicts again (this script's STATUS may be newer)
        rows += list(summary["modules"].items())
        survivors += summary["survivors"]
    if not rows:
        return
    header = f"{'module':<42} {'mutants':>7} {'killed':>7} {'survived':>8} {'timeout':>7} {'other':>5} {'score':>6}"
    print(header)
    print("-" * len(header))
    total = {"mutants": 0, "killed": 0, "survived": 0, "timeout": 0, "other": 0}
    for module, counts in rows:
        for key in total:
            total[key] += counts[key]
        print(_row(module.removeprefix("src/clustersim/"), counts))
    print("-" * len(header))
    print(_row("overall", total))
    if survivors:
        print(f"\n{len(survivors)} not killed:")
        for s in survivors:
            print(f"  {s['mutant']} [{s['status']}]: {s['diff']}")


def _row(name: str, c: dict[str, int]) -> str:
    score = (c["killed"] + c["timeout"]) / c["mutants"] if c["mutants"] else float("nan")
    return (
        f"{name:<42} {c['mutants']:>7} {c['killed']:>7} {c['survived']:>8} {c['timeout']:>7} {c['other']:>5} "
        f"{100 * score:>5.1f}%"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("groups", nargs="*", help=f"module groups (default: all): {', '.join(GROUPS)}")
    parser.add_argument("--report", action="store_true", help="only print the recorded results")
    parser.add_argument("--recheck", action="store_true", help="run the survivors against SURVIVOR_TESTS")
    parser.add_argument(
        "--resume", action="store_true", help="go on with a group's earlier snapshot and verdicts (default: afresh)"
    )
    # one worker by default: the machine is shared (mutmut takes the count only on its command line)
    parser.add_argument("--max-children", type=int, default=1, help="parallel mutant workers (default 1)")
    args = parser.parse_args()
    groups = args.groups or list(GROUPS)
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        parser.error(f"unknown groups {unknown} (valid: {', '.join(GROUPS)})")
    if args.recheck:
        for group in groups:
            recheck(group)
        return
    if not args.report:
        for group in groups:
            run_group(group, args.max_children, args.resume)
    report(groups)


if __name__ == "__main__":
    main()
