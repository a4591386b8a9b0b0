"""A training estimate with checkpoints and failures: the scenario's ``[checkpoint]`` table becomes a
checkpoint on its file system (the model's size, every rank writing its share) and a failure model,
and the job's totals take the expected run (``training.job.with_failures``)."""

from __future__ import annotations

from dataclasses import replace

from clustersim.catalog.registry import Catalog
from clustersim.catalog.schema import Storage
from clustersim.errors import ClusterSimError
from clustersim.reliability.failures import failure_rate
from clustersim.scenario.schema import CheckpointSpec
from clustersim.storage.checkpoint import CheckpointFormat, SaveMode, plan_checkpoint
from clustersim.storage.dataload import bytes_per_token, data_loading
from clustersim.storage.fsx import parse_storage
from clustersim.system import System
from clustersim.training.estimate import Estimate
from clustersim.training.job import Resilience, with_failures
from clustersim.units import parse_seconds
from clustersim.workload.transformer import Transformer

# Frameworks whose checkpoints are torch.distributed.checkpoint of FP32 sharded parameters (FSDP).
DCP_FRAMEWORKS = ("fsdp", "torchtitan")


def with_checkpoints(
    estimate: Estimate, spec: CheckpointSpec, *, model: Transformer, system: System, catalog: Catalog, framework: str
) -> Estimate:
    """``estimate`` with its totals including checkpoint stalls, failure losses and the storage's cost."""
    if estimate.totals is None:
        raise ClusterSimError(
            "a checkpoint policy needs a token budget (--tokens): without one there is no run to checkpoint",
            field="checkpoint",
        )
    if spec.async_save and spec.nvme:
        raise ClusterSimError(
            "checkpoint: async_save and nvme both take the save off the critical path; choose one", field="checkpoint"
        )
    fs = parse_storage(catalog, spec.storage)
    fmt = CheckpointFormat.TORCH_DCP if framework in DCP_FRAMEWORKS else CheckpointFormat.MEGATRON
    nvme = catalog.get("instance-nvme", "storage") if "instance-nvme" in catalog else None
    timing = plan_checkpoint(
        model, fs, instance=system.instance, num_nodes=system.num_nodes, devices_per_node=system.devices_per_node,
        fmt=fmt, mode=SaveMode.ASYNC if spec.async_save else SaveMode.NVME if spec.nvme else SaveMode.SYNC,
        nvme=nvme if isinstance(nvme, Storage) else None, accelerator=system.accelerator,
        host_copy_bytes_per_s=system.host_copy_bytes_per_s,
    )  # fmt: skip
    data = data_loading(
        fs, tokens_per_s=estimate.job.tokens_per_step / estimate.step_s, token_bytes=bytes_per_token(model.vocab),
        num_nodes=system.num_nodes, path=timing.path, instance=system.instance,
    )  # fmt: skip
    resilience = Resilience(
        checkpoint=timing,
        rate=failure_rate(spec.failure_rate),
        interval_s=None if spec.every == "auto" else parse_seconds(spec.every),
        storage_usd_per_hour=fs.price_usd_per_hour,
        storage_name=fs.describe(),
        data=data,
    )
    return replace(estimate, totals=with_failures(estimate.totals, system, resilience))
