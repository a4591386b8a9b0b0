"""A training log read into steps and stated settings, and turned into one training case
(``clustersim/validation/data/README.md``): what the log states wins, the options fill what it does not,
and where both state a value they must agree.

The measured values are medians over the logged steps numbered above ``warmup`` (default 2: the first
steps hold compilation, allocator growth and fp16 loss-scale search); a log with no step past the
warm-up is refused, naming how many it has.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError
from clustersim.ingest.cases import SystemOptions
from clustersim.validation.cases import PRECISIONS

DEFAULT_WARMUP_STEPS = 2
LAYOUT_FIELDS = ("tp", "pp", "dp", "cp", "ep", "vp")


@dataclass(frozen=True)
class Step:
    """One logged step: its number, the file's line and what it printed (the case format's names)."""

    number: int
    line: int
    values: dict[str, float]
    global_batch: int | None = None  # as the step line prints it (Megatron), where it does


@dataclass
class TrainingRun:
    """What a training log states: steps, model shape, layout, precision; each setting with the line
    that states it (for errors and the case's notes)."""

    path: str
    framework: str  # the case format's software.framework
    version: str
    steps: list[Step] = field(default_factory=list)
    model: dict[str, Any] = field(default_factory=dict)
    parallel: dict[str, Any] = field(default_factory=dict)
    world_size: int | None = None  # every rank, as the log prints it (a device mesh, Megatron's world size)
    precision: str | None = None
    lines: dict[str, int] = field(default_factory=dict)  # setting -> line stating it
    notes: list[str] = field(default_factory=list)
    system: dict[str, int] = field(default_factory=dict)  # ranks_per_node (NGPU), nodes (--nnodes), as launched
    software: dict[str, Any] = field(default_factory=dict)  # compiled: torch.compile on or off

    @property
    def compiled(self) -> bool | None:
        """Whether the run was compiled with torch.compile (None: the log does not say)."""
        return self.software.get("compiled")

    def world(self, nodes: int | None) -> int | None:
        """The ranks the log ran: its printed world size, else its ranks per node times its node count or
        ``nodes`` (the command line's; one where neither says); None where it states neither."""
        if self.world_size is not None:
            return self.world_size
        per_node = self.system.get("ranks_per_node")
        return None if per_node is None else per_node * (self.system.get("nodes") or nodes or 1)

    def world_said(self, nodes: int | None) -> str:
        """Where ``world`` comes from, in words, for errors."""
        if self.world_size is not None:
            return f"line {self.lines.get('world_size', 1)}: the log ran {self.world_size} ranks"
        count = self.system.get("nodes") or nodes or 1
        said = "its --nnodes" if "nodes" in self.system else "--nodes" if nodes else "one node: no --nodes"
        return (
            f"line {self.lines['ranks_per_node']}: the log ran {self.system['ranks_per_node']} ranks per node x "
            f"{count} node(s) ({said}) = {self.world(nodes)} ranks"
        )

    def state(self, group: str, key: str, value: Any, line: int) -> None:
        """Record ``key`` of ``group`` (``model``, ``parallel``, ``system``, ``software``), refusing a second line
        that disagrees."""
        groups = {"model": self.model, "parallel": self.parallel, "system": self.system, "software": self.software}
        target = groups[group]
        if key in target and target[key] != value:
            raise ClusterSimError(
                f"{self.path}, line {line}: {key} is {value!r} here but {target[key]!r} on line {self.lines[key]}",
                field=key,
                value=value,
            )
        if key not in target:
            target[key] = value
            self.lines[key] = line


def median_after_warmup(run: TrainingRun, warmup: int) -> tuple[dict[str, float], list[Step]]:
    """The median of every measured value over the logged steps numbered above ``warmup``."""
    if not run.steps:
        raise ClusterSimError(f"{run.path}: no training step logged (a log cut before the first one?)", field="FILES")
    kept = [step for step in run.steps if step.number > warmup]
    if not kept:
        last = run.steps[-1].number
        raise ClusterSimError(
            f"{run.path}: {len(run.steps)} step(s) logged, the last numbered {last}, none past the {warmup} "
            f"warm-up steps; give --warmup-steps below {last}",
            field="--warmup-steps",
            value=warmup,
        )
    keys = sorted({key for step in kept for key in step.values})
    medians = {key: statistics.median(s.values[key] for s in kept if key in s.values) for key in keys}
    return medians, kept


def _agreed(run: TrainingRun, key: str, stated: Any, given: Any, option: str) -> Any:
    if given is None:
        return stated
    if stated is not None and stated != given:
        raise ClusterSimError(
            f"{run.path}, line {run.lines.get(key, 1)}: the log says {key} {stated}, {option} says {given}",
            field=option,
            value=given,
        )
    return given


def resolved_layout(run: TrainingRun, options: SystemOptions) -> tuple[dict[str, Any], int]:
    """The case's ``parallel`` and device count: the log's layout with the options where it is silent;
    data parallel from the world size where the log prints one."""
    p = dict(run.parallel)
    for key, option in (("tp", "--tp"), ("pp", "--pp"), ("cp", "--cp")):
        p[key] = _agreed(run, key, p.get(key), getattr(options, key), option)
    p["global_batch"] = _agreed(run, "global_batch", p.get("global_batch"), options.global_batch, "--global-batch")
    missing = [key for key in ("tp", "pp") if p.get(key) is None]
    if missing:
        raise ClusterSimError(
            f"{run.path}: the log does not state {' or '.join(missing)} (no arguments block or an excerpt of one); "
            f"give {' and '.join('--' + key for key in missing)}",
            field="--" + missing[0],
        )
    if p.get("global_batch") is None:
        raise ClusterSimError(f"{run.path}: the log does not state the global batch; give --global-batch")
    model_parallel = p["tp"] * p["pp"] * (p.get("cp") or 1)
    world = run.world(options.nodes)
    if world is None and p.get("dp") is not None:
        world = p["dp"] * model_parallel
    said = run.world_said(options.nodes) if run.world(None) is not None else f"world size {world}"
    degrees = f"tp {p['tp']} x pp {p['pp']} x cp {p.get('cp') or 1}"
    if p.get("dp") is not None:
        dp = _agreed(run, "dp", p["dp"], options.dp, "--dp")
    elif options.dp is None and world is not None and world % model_parallel:
        raise ClusterSimError(
            f"{run.path}, {said}, which {degrees} = {model_parallel} does not divide (--nodes, --tp, --pp, --cp)",
            field="--nodes" if "ranks_per_node" in run.system else "FILES",
        )
    else:
        dp = options.dp or (world // model_parallel if world else None)
    if world is not None and dp is not None and dp * model_parallel != world:
        raise ClusterSimError(f"{run.path}, {said}, not dp {dp} x {degrees}", field="--dp" if options.dp else "FILES")
    if dp is None:
        raise ClusterSimError(f"{run.path}: the log states no world size or data-parallel degree; give --dp")
    p["dp"] = dp
    return {k: v for k, v in p.items() if v is not None}, dp * model_parallel


def training_system(options: SystemOptions, catalog: Catalog, devices: int, where: str) -> dict[str, Any]:
    """The case's ``system``: ``devices`` of the instance or accelerator the options name."""
    if options.instance is not None:
        instance = catalog.instance(options.instance)
        per_node = int(instance.num_accelerators.value)
        system: dict[str, Any] = {"instance": instance.id, "accelerator": instance.accelerator}
    elif options.accelerator is not None:
        per_node = min(devices, 8)
        system = {"accelerator": catalog.accelerator(options.accelerator).id}
    else:
        raise ClusterSimError(
            f"{where}: a training log does not name its hardware; give --instance (or --accelerator)",
            field="--instance",
        )
    nodes = math.ceil(devices / per_node)
    if options.nodes is not None and options.nodes != nodes:
        raise ClusterSimError(
            f"{where}: {devices} devices at {per_node} per node are {nodes} node(s), --nodes says {options.nodes}",
            field="--nodes",
            value=options.nodes,
        )
    system |= {"devices": devices, "devices_per_node": min(per_node, devices), "nodes": nodes}
    if options.instance is None and nodes > 1:
        if options.inter_node_gbps is None:
            raise ClusterSimError(
                f"{where}: {nodes} nodes and no catalogued instance; give --instance or --inter-node-gbps",
                field="--inter-node-gbps",
            )
        system["inter_node_Gbps_per_node"] = options.inter_node_gbps
    return system


def resolved_model(run: TrainingRun, given: dict[str, Any] | None, options: SystemOptions) -> dict[str, Any]:
    """The case's ``model``: the log's shape, or the ``--model`` shape checked against what the log states."""
    model = dict(run.model)
    if given is not None:
        for key, value in given.items():
            if key in model and model[key] != value and key != "name":
                raise ClusterSimError(
                    f"{run.path}, line {run.lines.get(key, 1)}: the log says {key} {model[key]}, --model "
                    f"{given.get('name')} has {value}",
                    field="--model",
                    value=given.get("name"),
                )
        model = given | {k: v for k, v in model.items() if k in ("seq_len",)}
    model["seq_len"] = _agreed(run, "seq_len", model.get("seq_len"), options.seq_len, "--seq-len")
    missing = [k for k in ("layers", "hidden", "ffn_hidden", "heads", "vocab", "seq_len") if model.get(k) is None]
    if missing:
        hint = "--seq-len" if missing == ["seq_len"] else "--model (a zoo id or config)"
        raise ClusterSimError(
            f"{run.path}: the log does not state the model's {', '.join(missing)}; give {hint}",
            field=hint.split()[0],
        )
    model.setdefault("ffn_type", "gelu")
    return model


def training_case(
    run: TrainingRun, options: SystemOptions, catalog: Catalog, model: dict[str, Any] | None
) -> dict[str, Any]:
    """The training case of ``run`` (see the module's docstring)."""
    warmup = DEFAULT_WARMUP_STEPS if options.warmup_steps is None else options.warmup_steps
    measured, kept = median_after_warmup(run, warmup)
    batches = {step.global_batch for step in kept if step.global_batch is not None}
    if len(batches) > 1:
        raise ClusterSimError(
            f"{run.path}, line {kept[-1].line}: the global batch changes over the kept steps ({sorted(batches)}: "
            f"a batch ramp-up?); give --warmup-steps past the ramp",
            field="--warmup-steps",
        )
    for batch in batches:
        run.state("parallel", "global_batch", batch, kept[0].line)
    parallel, devices = resolved_layout(run, options)
    precision = _agreed(run, "precision", run.precision, options.precision, "--precision")
    if precision is None:
        raise ClusterSimError(f"{run.path}: the log does not state its number format; give --precision")
    if precision not in PRECISIONS:
        raise ClusterSimError(f"--precision {precision!r} is not one (valid: {', '.join(PRECISIONS)})")
    name = Path(run.path).name
    stem = re.sub(r"[^A-Za-z0-9]+", "_", Path(run.path).stem).strip("_") or run.framework
    first, last = kept[0], kept[-1]
    notes = [
        f"read by clustersim ingest from {name}: median of {len(kept)} logged steps ({first.number}-{last.number}, "
        f"lines {first.line}-{last.line}) numbered above the {warmup} warm-up steps",
        *run.notes,
    ]
    return {
        "id": f"{stem}_{run.framework}",
        "kind": "training",
        "source": f"{name} lines {first.line}-{last.line} ({run.version})",
        "notes": "; ".join(notes),
        "model": resolved_model(run, model, options),
        "system": training_system(options, catalog, devices, f"{run.path}"),
        "parallel": parallel,
        "precision": precision,
        "measured": {k: round(v, 6) for k, v in measured.items()},
        "software": {"framework": run.framework, "version": run.version}
        | ({"compiled": run.compiled} if run.framework == "torchtitan" else {})
        | ({"bf16_layers": run.software["bf16_layers"]} if "bf16_layers" in run.software else {}),
    }
