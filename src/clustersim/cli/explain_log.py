"""``explain --log FILE``: a Megatron-LM training log as the measurement and as the job's stated settings.

The log is read by ``clustersim.ingest.megatron_log`` (the reader ``clustersim ingest`` uses); its measured
step is the median of the logged steps after the warm-up (``ingest.training_run.median_after_warmup``). What
the log states (TP, PP, CP, EP, VP, micro-batch, ZeRO-1 from the distributed optimizer, sequence parallelism,
recompute, global batch, sequence length, precision) fills the options the command line does not give; where
both state a value they must agree, and the model's shape and the data-parallel degree must match the log's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clustersim.errors import ClusterSimError

if TYPE_CHECKING:
    from clustersim.execution import Layout
    from clustersim.workload.transformer import Transformer

# the log's settings: (its key in ``TrainingRun.parallel``/``model``, explain's parameter, the flag)
SETTINGS = (
    ("tp", "tp", "--tp"),
    ("pp", "pp", "--pp"),
    ("cp", "cp", "--cp"),
    ("ep", "ep", "--ep"),
    ("vp", "vp", "--vp"),
    ("micro_batch", "micro_batch", "--micro-batch"),
    ("zero", "zero", "--zero"),
    ("sequence_parallel", "sp", "--sp/--no-sp"),
    ("recompute", "recompute", "--recompute"),
    ("global_batch", "global_batch", "--global-batch"),
    ("seq_len", "seq", "--seq"),
    ("precision", "precision", "--precision"),
)
SHAPE = ("layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab")


@dataclass(frozen=True)
class LoggedRun:
    """What ``explain`` takes from a log: the measured step and the settings it states."""

    path: str
    step_s: float
    steps: int  # logged steps after the warm-up, whose median ``step_s`` is
    settings: dict[str, Any]  # explain's parameter name -> the log's value
    lines: dict[str, int]  # explain's parameter name (or a model field) -> the log's line
    dp: int | None
    model: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"option": "--log", "value": self.path, "steps": self.steps, "settings": self.settings}


def read_log(path: Path) -> LoggedRun:
    """The measured step and stated settings of the Megatron-LM log ``path``; another file is refused."""
    from clustersim.ingest.megatron_log import looks_like_megatron, read_megatron_log
    from clustersim.ingest.training_run import DEFAULT_WARMUP_STEPS, median_after_warmup

    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ClusterSimError(
            f"--log: cannot read {path}: {exc.strerror or exc}", field="--log", value=str(path)
        ) from None
    if not looks_like_megatron(text):
        raise ClusterSimError(
            f"--log: {path} is not a Megatron-LM training log (no 'elapsed time per iteration (ms)' line); "
            "give the run's step with --measured-step instead",
            field="--log",
            value=str(path),
        )
    run = read_megatron_log(path)
    measured, kept = median_after_warmup(run, DEFAULT_WARMUP_STEPS)
    stated = dict(run.parallel) | {"seq_len": run.model.get("seq_len"), "precision": run.precision}
    batches = {step.global_batch for step in kept if step.global_batch is not None}
    if "global_batch" not in stated and len(batches) == 1:
        stated["global_batch"] = batches.pop()
    settings, lines = {}, {}
    for key, name, _ in SETTINGS:
        if stated.get(key) is not None:
            settings[name] = stated[key]
            lines[name] = run.lines.get(key, 1)
    lines |= {key: run.lines.get(key, 1) for key in SHAPE}
    return LoggedRun(str(path), measured["step_time_s"], len(kept), settings, lines, run.parallel.get("dp"), run.model)


def merged(log: LoggedRun, values: dict[str, Any], given: set[str]) -> dict[str, Any]:
    """explain's options with the log's settings where the command line gives none (``given``: the flags it
    gives); a flag that states another value than the log is refused, naming the log's line."""
    out = dict(values)
    for _, name, flag in SETTINGS:
        if name not in log.settings:
            continue
        stated = log.settings[name]
        if flag in given:
            mine = getattr(values[name], "value", values[name])  # an enum (recompute) by its value
            if mine != stated:
                raise ClusterSimError(
                    f"{log.path}, line {log.lines[name]}: the log says {name} {stated}, {flag} says {mine}",
                    field=flag,
                    value=mine,
                )
            continue
        out[name] = stated
    return out


def check_run(log: LoggedRun, model: Transformer, layout: Layout) -> None:
    """The model's shape and the data-parallel degree the system gives, against what the log states."""
    for key in SHAPE:
        mine = (model.kv_heads or model.heads) if key == "kv_heads" else getattr(model, key)  # 0: one per head
        if key in log.model and mine != log.model[key]:
            raise ClusterSimError(
                f"{log.path}, line {log.lines[key]}: the log's model has {key} {log.model[key]}, {model.name} has "
                f"{mine}",
                field="MODEL",
                value=model.name,
            )
    if log.dp is not None and log.dp != layout.dp:
        raise ClusterSimError(
            f"{log.path}: the log ran data-parallel size {log.dp}, the system given makes it {layout.dp} "
            "(--nodes, --devices-per-node)",
            field="--nodes",
            value=layout.dp,
        )
