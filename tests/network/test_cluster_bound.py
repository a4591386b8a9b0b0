"""A job is no larger than the catalogued cluster of its instance (the template's largest published
size): 3,000 p5 nodes used to enlarge the 2,500-host fabric silently; a catalog file with a larger
cluster entry lifts the bound, so it comes from data."""

import pytest
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.cli.app import app
from clustersim.errors import ClusterSimError
from clustersim.network.flowsim.cluster import cluster_hosts
from clustersim.network.topology import check_cluster_size, cluster_limit, topology_for_instance
from clustersim.system import system_for_instance

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "COLUMNS": "200"}
BIGGER = """[[cluster]]
id = "my-cluster"
name = "A bigger cluster"
provider = "aws"
topology = "fat_tree"
oversubscription = { value = 1, provenance = "documentation", source = "mine" }
network_layers = { value = 3, provenance = "documentation", source = "mine" }
placement = "cluster placement group"
availability_zones = { value = 1, provenance = "documentation", source = "mine" }

[[cluster.generations]]
instance = "p5.48xlarge"
max_accelerators = { value = 40000, provenance = "documentation", source = "mine" }
"""


def test_the_limit_is_the_templates_largest_published_cluster():
    limit = cluster_limit(load_catalog(use_env=False), "p5.48xlarge")
    assert limit is not None and limit.max_nodes == 2500 and limit.max_accelerators == 20000
    assert cluster_limit(load_catalog(use_env=False), "dgx-h100") is None  # no template lists it


@pytest.mark.parametrize(
    "build",
    [
        lambda cat: topology_for_instance(cat, "p5.48xlarge", 3000),
        lambda cat: system_for_instance(cat, "p5.48xlarge", 3000),
        lambda cat: cluster_hosts(cat, "p5.48xlarge", 3000),
        lambda cat: check_cluster_size(cat, "p5.48xlarge", 2501),
    ],
)
def test_a_job_larger_than_the_cluster_is_refused_naming_the_limit(build):
    with pytest.raises(ClusterSimError, match="2,500") as err:
        build(load_catalog(use_env=False))
    assert err.value.field == "nodes" and "--catalog" in str(err.value)


def test_a_user_cluster_file_lifts_the_limit(tmp_path):
    (tmp_path / "cluster.toml").write_text(BIGGER, encoding="utf-8")
    cat = load_catalog([tmp_path], use_env=False)
    assert cluster_limit(cat, "p5.48xlarge").max_nodes == 5000
    assert cluster_hosts(cat, "p5.48xlarge", 3000) == 5000
    assert topology_for_instance(cat, "p5.48xlarge", 3000).num_devices == 24000


@pytest.mark.parametrize(
    "args",
    [
        ["train", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "3000"],
        ["collective", "all_reduce", "--instance", "p5.48xlarge", "--nodes", "100000"],
        ["fabric", "simulate", "--instance", "p5.48xlarge", "--nodes", "3000"],
        ["reliability", "--instance", "p5.48xlarge", "--nodes", "3000", "--runs", "0"],
        ["storage", "checkpoint", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "3000"],
    ],
    ids=lambda a: a[0],
)
def test_every_command_with_nodes_refuses_beyond_the_cluster(args):
    result = runner.invoke(app, [*args, "--json"], env=ENV)
    assert result.exit_code == 2, result.output
    assert "2,500" in result.output and "Traceback" not in result.output
