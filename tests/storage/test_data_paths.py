"""Which client paths an instance can take: GPUDirect Storage needs GPUs with GPUDirect RDMA; on
Trainium it is refused when asked for, and the default path there is plain EFA (or ENA)."""

import pytest
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.cli.app import app
from clustersim.errors import ClusterSimError
from clustersim.storage.checkpoint import plan_checkpoint
from clustersim.storage.fsx import PATH_NEEDS, ClientPath, client_path_for, file_system
from clustersim.workload import zoo

CATALOG = load_catalog(use_env=False)
EFA_FS = file_system(CATALOG, "PERSISTENT_2-1000", "100800GiB", efa=True)
ENA_FS = file_system(CATALOG, "PERSISTENT_2-1000", "100800GiB")
MODEL = zoo.load_model("llama3-8b", use_env=False)
TRAINIUM = ("trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge")
GPUS = ("p4d.24xlarge", "p5.48xlarge", "p5en.48xlarge")
RUNNER = CliRunner(env={"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": ""})


def chip_of(instance: str):
    entry = CATALOG.instance(instance)
    return CATALOG.accelerator(entry.accelerator), entry


def test_gds_declares_the_families_it_runs_on_and_a_source():
    needs = PATH_NEEDS[ClientPath.EFA_GDS]
    assert set(needs.accelerator_families) == {"ampere", "hopper", "blackwell"} and needs.gpudirect_rdma
    assert "GPUDirect Storage" in needs.source
    assert ClientPath.EFA not in PATH_NEEDS and ClientPath.ENA not in PATH_NEEDS  # open to every instance


@pytest.mark.parametrize("instance", TRAINIUM)
def test_gds_asked_for_on_trainium_is_refused_naming_the_chip(instance):
    chip, entry = chip_of(instance)
    with pytest.raises(ClusterSimError) as caught:
        client_path_for(EFA_FS, ClientPath.EFA_GDS, chip, entry)
    assert f"{instance} has {chip.id} (trainium) accelerators, not GPUs" in str(caught.value)
    assert caught.value.field == "path" and "use efa or ena" in str(caught.value)


@pytest.mark.parametrize("instance", TRAINIUM)
def test_the_default_path_on_trainium_is_plain_efa_or_ena(instance):
    chip, entry = chip_of(instance)
    assert client_path_for(EFA_FS, None, chip, entry) is ClientPath.EFA
    assert client_path_for(ENA_FS, None, chip, entry) is ClientPath.ENA
    timing = plan_checkpoint(MODEL, EFA_FS, instance=entry, num_nodes=2, devices_per_node=32, accelerator=chip)
    assert timing.path is ClientPath.EFA


@pytest.mark.parametrize("instance", GPUS)
def test_the_default_path_on_gpus_with_gpudirect_rdma_stays_efa_gds(instance):
    chip, entry = chip_of(instance)
    assert client_path_for(EFA_FS, None, chip, entry) is ClientPath.EFA_GDS
    assert client_path_for(EFA_FS, ClientPath.EFA_GDS, chip, entry) is ClientPath.EFA_GDS


def test_gds_on_an_instance_without_gpudirect_rdma_is_refused_and_not_the_default():
    chip, entry = chip_of("p5.48xlarge")
    network = entry.network.model_copy(
        update={"gpudirect_rdma": entry.network.gpudirect_rdma.model_copy(update={"value": False})}
    )
    no_gdr = entry.model_copy(update={"network": network})
    with pytest.raises(ClusterSimError, match="GPUDirect Storage needs GPUDirect RDMA"):
        client_path_for(EFA_FS, ClientPath.EFA_GDS, chip, no_gdr)
    assert client_path_for(EFA_FS, None, chip, no_gdr) is ClientPath.EFA


def test_storage_commands_refuse_gds_on_trainium_and_default_to_efa():
    efa = "fsx:PERSISTENT_2-1000:100800GiB:efa"
    for command in (["checkpoint", "llama3-8b", "--storage", efa], ["striping", "--storage", efa]):
        refused = RUNNER.invoke(app, ["storage", *command, "--instance", "trn1.32xlarge", "--path", "efa-gds"])
        assert refused.exit_code == 2 and "not GPUs" in refused.output, refused.output
        default = RUNNER.invoke(app, ["storage", *command, "--instance", "trn1.32xlarge", "--json"])
        assert default.exit_code == 0 and '"path": "efa"' in default.output, default.output
        gpu = RUNNER.invoke(app, ["storage", *command, "--instance", "p5.48xlarge", "--json"])
        assert gpu.exit_code == 0 and '"path": "efa-gds"' in gpu.output, gpu.output
