"""Words follow the catalog's scale-up link: a NeuronLink fabric is never labelled NVLink, and Trainium
collectives are not described with NCCL's protocol or NVLS words; the numbers stay the model's."""

import json

import pytest
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.cli.app import app
from clustersim.network.topology import scaleup_link_name

CATALOG = load_catalog(use_env=False)
RUNNER = CliRunner(env={"CLUSTERSIM_CATALOG": "", "COLUMNS": "200"})
SWEEP = ["--min", "1M", "--max", "1G", "--factor", "32"]


@pytest.mark.parametrize(("chip", "name"), [("trainium1", "NeuronLink"), ("trainium2", "NeuronLink"),
                                            ("h100-sxm", "NVLink"), ("b200", "NVLink")])  # fmt: skip
def test_the_scale_up_fabric_is_named_from_the_catalogs_link_type(chip, name):
    assert scaleup_link_name(CATALOG, CATALOG.accelerator(chip)) == name


@pytest.mark.parametrize("nodes", ["1", "2"])
def test_a_trainium_collective_says_neuronlink_and_no_nccl_protocol_or_nvls(nodes):
    args = ["collective", "all_reduce", "--instance", "trn1.32xlarge", "--nodes", nodes, *SWEEP]
    text = RUNNER.invoke(app, args).output
    assert "NVLink" not in text and "NVLS" not in text
    assert "/ll" not in text and "/simple" not in text  # NCCL's protocols are not Neuron's
    rows = json.loads(RUNNER.invoke(app, [*args, "--json"]).output)["rows"]
    assert all("NVLink" not in row["bound"] for row in rows)
    if nodes == "1":
        assert {row["bound"] for row in rows} == {"NeuronLink"}


def test_a_gpu_collective_keeps_nccls_words_and_the_numbers_do_not_depend_on_the_words():
    args = ["collective", "all_reduce", "--instance", "p5.48xlarge", "--nodes", "1", *SWEEP]
    text = RUNNER.invoke(app, args).output
    assert "NVLink" in text and "ring/" in text
    gpu = json.loads(RUNNER.invoke(app, [*args, "--json"]).output)["rows"]
    assert {row["bound"] for row in gpu} <= {"NVLink", "NVLink SHARP"}


def test_a_forced_algorithm_trainium_cannot_run_lists_algorithms_without_nccl_protocols():
    refused = RUNNER.invoke(app, ["collective", "all_reduce", "--instance", "trn1.32xlarge", "--nodes", "1",
                                  "--algo", "nvls"])  # fmt: skip
    assert refused.exit_code == 2 and "valid: mesh, rdh, ring" in refused.output and "/ll" not in refused.output


@pytest.mark.parametrize(("instance", "tier"), [("trn1.32xlarge", "neuronlink"), ("p5.48xlarge", "nvlink")])
def test_the_flow_simulators_binding_tier_names_the_instances_own_scale_up_link(instance, tier):
    args = ["fabric", "simulate", "--instance", instance, "--nodes", "1", "--size", "64MiB", "--json"]
    result = RUNNER.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["binding_tier"] == tier


def test_trainiums_data_paths_name_the_device_not_a_gpu_and_refuse_ncclss_overhead():
    text = RUNNER.invoke(app, ["transport", "datapath", "--instance", "trn1.32xlarge"]).output
    assert "GPU" not in text and "EFA RDMA to Trainium memory" in text and "copy Trainium to host" in text
    refused = RUNNER.invoke(app, ["transport", "datapath", "--instance", "trn1.32xlarge", "--nccl"])
    assert refused.exit_code == 2 and "NCCL runs on NVIDIA GPUs" in refused.output
    gpu = RUNNER.invoke(app, ["transport", "datapath", "--instance", "p5.48xlarge", "--nccl"]).output
    assert "GPUDirect RDMA" in gpu and "copy GPU to host" in gpu and "NCCL proxy" in gpu
