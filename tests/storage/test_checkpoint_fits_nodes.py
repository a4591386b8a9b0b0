"""A checkpoint is refused from nodes that cannot hold its state (device and host memory together)."""

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.storage.checkpoint import CheckpointFormat, plan_checkpoint
from clustersim.storage.fsx import file_system
from clustersim.workload import zoo
from clustersim.workload.transformer import Quantization

CATALOG = load_catalog(use_env=False)
P5 = CATALOG.instance("p5.48xlarge")
H100 = CATALOG.accelerator(P5.accelerator)
FS = file_system(CATALOG, "PERSISTENT_2-1000", "100800GiB", efa=True)
MODEL = zoo.load_model("llama3.1-405b", use_env=False)


def _plan(nodes: int, fmt: CheckpointFormat = CheckpointFormat.MEGATRON, model=MODEL):
    return plan_checkpoint(model, FS, instance=P5, num_nodes=nodes, devices_per_node=8, fmt=fmt, accelerator=H100)


def test_a_405b_training_checkpoint_does_not_fit_one_node():
    # 405.9e9 params x 14 B = 5.17 TiB; one p5 holds 8 x 80 GiB + 2 TiB = 2.62 TiB.
    with pytest.raises(ClusterSimError, match=r"^nodes: 1 x p5.48xlarge hold 2.62 TiB .* 5.17 TiB megatron .* 2 nodes"):
        _plan(1)
    assert _plan(2).checkpoint_bytes == pytest.approx(MODEL.num_params() * 14)


def test_its_weights_alone_fit_one_node():
    assert _plan(1, CheckpointFormat.WEIGHTS).checkpoint_bytes == pytest.approx(MODEL.num_params() * 2)


def test_without_the_accelerator_the_nodes_are_not_checked():
    timing = plan_checkpoint(MODEL, FS, instance=P5, num_nodes=1, devices_per_node=8)
    assert timing.checkpoint_bytes == pytest.approx(MODEL.num_params() * 14)


def test_a_quantized_model_is_refused():
    model = MODEL.model_copy(update={"quantization": Quantization(method="gptq", bits=4, group_size=128)})
    with pytest.raises(ClusterSimError, match=r"4-bit gptq, groups of 128 checkpoint.*not modelled"):
        _plan(4, model=model)
