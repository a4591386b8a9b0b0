"""``explain --log FILE``: a Megatron-LM or torchtitan training log as the measurement and as the job's
stated settings.

The log is read by the reader ``clustersim ingest`` uses (``clustersim.ingest.megatron_log`` or
``torchtitan_log``, chosen by content); the measurement is the median of the logged steps after the warm-up
(``ingest.training_run.median_after_warmup``): Megatron's elapsed time per iteration, torchtitan's tokens per
second per device (``tps``, turned into seconds per step with the job's tokens per step and devices). What the
log states (TP, PP, CP, EP, VP, micro-batch, ZeRO, sequence parallelism, recompute, global batch, sequence
length, precision, the framework, torchtitan's torch.compile) fills the options the command line does not give;
where both state a value they must agree, and the model's shape, the world size (torchtitan's NGPU is per node:
times --nodes) and the data-parallel degree must match the log's.
A file neither reader understands is refused, naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clustersim.choices import CudaGraphs, RecomputeModule
from clustersim.cli.job_options import recompute_modules
from clustersim.errors import ClusterSimError

if TYPE_CHECKING:
    from clustersim.execution import Layout
    from clustersim.ingest.training_run import TrainingRun as LoggedSteps
    from clustersim.scenario.training import TrainingRun
    from clustersim.training.estimate import Estimate
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
    ("recompute_modules", "recompute_modules", "--recompute-modules"),
    ("etp", "etp", "--etp"),
    ("ep_dispatcher", "ep_dispatcher", "--ep-dispatcher"),
    ("ep_overlap", "ep_overlap", "--ep-overlap/--no-ep-overlap"),
    ("global_batch", "global_batch", "--global-batch"),
    ("seq_len", "seq", "--seq"),
    ("precision", "precision", "--precision"),
    ("bf16_layers", "bf16_layers", "--bf16-layers"),
)
SHAPE = ("layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab")
# the measured value each framework's log gives, as the case format names it
MEASURE = {"megatron": "step_time_s", "megatron-deepspeed": "step_time_s", "torchtitan": "tokens_per_s_per_device"}


@dataclass(frozen=True)
class LoggedRun:
    """What ``explain`` takes from a log: the measured value and the settings it states."""

    path: str
    framework: str  # the software profile the log's framework runs as (megatron, megatron-deepspeed, torchtitan)
    measure: str  # what the log measures: step_time_s or tokens_per_s_per_device
    value: float  # its median after the warm-up
    steps: int  # logged steps after the warm-up, whose median ``value`` is
    settings: dict[str, Any]  # explain's parameter name -> the log's value
    lines: dict[str, int]  # explain's parameter name (or a model field, world_size) -> the log's line
    dp: int | None
    world_size: int | None  # as the log prints it (a device mesh, Megatron's world size)
    model: dict[str, Any]
    launched: LoggedSteps | None = None  # the log as read: its ranks per node x nodes where it prints no world

    def world(self, nodes: int) -> tuple[int | None, str]:
        """The ranks the log ran with ``nodes`` (--nodes) where it prints only its ranks per node (torchtitan's
        NGPU), and where that comes from in words."""
        if self.launched is None or self.launched.world(nodes) is None:
            return self.world_size, f"line {self.lines.get('world_size', 1)}: the log ran {self.world_size} ranks"
        return self.launched.world(nodes), self.launched.world_said(nodes)

    def step_s(self, estimate: Estimate) -> float:
        """Seconds per step the measurement means (tokens per second with the estimate's tokens and devices)."""
        if self.measure == "tokens_per_s_per_device":
            return estimate.job.tokens_per_step / (self.value * estimate.num_devices)
        return self.value

    def to_json(self) -> dict[str, Any]:
        return {
            "option": "--log", "value": self.path, "framework": self.framework, "measure": self.measure,
            "measured": self.value, "steps": self.steps, "settings": self.settings, "cuda_graphs": self.cuda_graphs,
        }  # fmt: skip

    @property
    def cuda_graphs(self) -> str | None:
        """Whether the run captured CUDA graphs (none, partial, full), where the log says (None: it does not)."""
        return None if self.launched is None else self.launched.software.get("cuda_graphs")


def host_caveat(log: LoggedRun | None, run: TrainingRun) -> list[str]:
    """What the estimate leaves out that the log says matters: a MoE step run without CUDA graphs, or with partial
    ones, waits on its host (every kernel's launches, or the routed experts' after their device-host sync), which
    clustersim prices only on the hosts its framework's profile has a time for (``SoftwareProfile.eager_moe_layer_s``
    and ``partial_graph_moe_layer_s``: Grace, on GB200 and GB300)."""
    from clustersim.scenario.training import run_system

    if log is None or log.launched is None or log.cuda_graphs not in ("none", "partial") or run.model.moe is None:
        return []
    _, system, software, _ = run_system(run)
    eager = log.cuda_graphs == "none"
    priced = software.eager_moe_layer_s if eager else software.partial_graph_moe_layer_s
    if system.accelerator.id in priced:
        return []
    ran, wait = (
        ("without CUDA graphs", "its host's kernel launches")
        if eager
        else (
            "with partial CUDA graphs",
            "its host at each MoE layer's routed experts, launched after a device-host sync",
        )
    )
    return [
        f"the log ran {ran} (line {log.launched.lines['cuda_graphs']}): a MoE step can then wait on {wait}, which "
        f"{software.name}'s profile prices on {', '.join(sorted(priced)) or 'no accelerator'}'s host but not on "
        f"{system.accelerator.id}'s (no such run measured there); part of a gap may be the host's"
    ]


def read_log(path: Path) -> LoggedRun:
    """The measurement and stated settings of the Megatron-LM or torchtitan log ``path``; another file is
    refused, naming it."""
    from clustersim.ingest.megatron_log import looks_like_megatron, read_megatron_log
    from clustersim.ingest.torchtitan_log import looks_like_torchtitan, read_torchtitan_log
    from clustersim.ingest.training_run import DEFAULT_WARMUP_STEPS, median_after_warmup

    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ClusterSimError(
            f"--log: cannot read {path}: {exc.strerror or exc}", field="--log", value=str(path)
        ) from None
    if looks_like_megatron(text):
        run = read_megatron_log(path)
    elif looks_like_torchtitan(text):
        run = read_torchtitan_log(path)
    else:
        raise ClusterSimError(
            f"--log: {path} is neither a Megatron-LM training log (no 'elapsed time per iteration (ms)' line) nor a "
            "torchtitan one (no 'step: N  loss: ...  tps: ...  mfu: ...' line); give the run's step with "
            "--measured-step instead",
            field="--log",
            value=str(path),
        )
    measured, kept = median_after_warmup(run, DEFAULT_WARMUP_STEPS)
    measure = MEASURE[run.framework]
    if measure not in measured:
        raise ClusterSimError(f"--log: {path}: no step past the warm-up logs its {measure}", field="--log")
    settings, lines = _settings(run, kept)
    lines |= {key: run.lines.get(key, 1) for key in (*SHAPE, "world_size")}
    if run.compiled is not None:
        settings["torch_compile"], lines["torch_compile"] = run.compiled, run.lines["compiled"]
    return LoggedRun(
        str(path), run.framework, measure, measured[measure], len(kept), settings, lines, run.parallel.get("dp"),
        run.world_size, run.model, run,
    )  # fmt: skip


def _settings(run: LoggedSteps, kept: list[Any]) -> tuple[dict[str, Any], dict[str, int]]:
    stated = dict(run.parallel) | {"seq_len": run.model.get("seq_len"), "precision": run.precision}
    stated["bf16_layers"] = run.software.get("bf16_layers")
    batches = {step.global_batch for step in kept if step.global_batch is not None}
    if "global_batch" not in stated and len(batches) == 1:
        stated["global_batch"] = batches.pop()
    settings, lines = {}, {}
    for key, name, _ in SETTINGS:
        if stated.get(key) is not None:
            settings[name] = _option_text(name, stated[key])
            lines[name] = run.lines.get(key, 1)
    return settings, lines


def _option_text(name: str, value: Any) -> Any:
    """A setting as its option takes it: the recompute modules (a log's list, or the flag's text) as their
    comma-separated names in one order, so that the same set reads the same; a flex dispatcher's backend as
    --ep-dispatcher names it; any other setting as it is."""
    if name == "ep_dispatcher":  # HybridEP is priced as DeepEP: one option value for both
        return "deepep" if value == "hybridep" else value
    if name != "recompute_modules":
        return value
    named = set(value) if isinstance(value, list) else {m.value for m in recompute_modules(value) or ()}
    return ",".join(m.value for m in RecomputeModule if m.value in named)


def merged(log: LoggedRun, values: dict[str, Any], given: set[str]) -> dict[str, Any]:
    """explain's options with the log's settings where the command line gives none (``given``: the flags it
    gives); a flag that states another value than the log is refused, naming the log's line. The global
    batch, which turns a rate into a step, must come from one of them."""
    out = dict(values)
    for _, name, flag in SETTINGS:
        if name not in log.settings:
            continue
        stated = log.settings[name]
        if flag in given:
            mine = _option_text(name, getattr(values[name], "value", values[name]))  # an enum (recompute) by its value
            if mine != stated:
                raise ClusterSimError(
                    f"{log.path}, line {log.lines[name]}: the log says {name} {stated}, {flag} says {mine}",
                    field=flag,
                    value=mine,
                )
            continue
        out[name] = stated
    if out.get("global_batch") is None:
        raise ClusterSimError(
            f"{log.path}: the log does not state the global batch (torchtitan prints it only on its 'Training "
            "starts at step 1, with local batch size ...' line); give --global-batch",
            field="--global-batch",
        )
    return out


def graphs_of(log: LoggedRun, cuda_graphs: CudaGraphs | None) -> CudaGraphs | None:
    """--cuda-graphs, or the log's capture where the command line does not give it; a flag that says otherwise
    than the log is refused, naming its line."""
    stated = log.cuda_graphs
    if stated is None or log.launched is None:
        return cuda_graphs
    if cuda_graphs is not None and stated != cuda_graphs:
        raise ClusterSimError(
            f"{log.path}, line {log.launched.lines['cuda_graphs']}: the log ran CUDA graphs {stated}, --cuda-graphs "
            f"says {cuda_graphs.value}",
            field="--cuda-graphs",
            value=cuda_graphs.value,
        )
    return CudaGraphs(stated)


def compiled_of(log: LoggedRun, torch_compile: bool | None) -> bool | None:
    """--torch-compile/--no-torch-compile, or the log's torch.compile where the command line gives neither; a
    flag that says otherwise than the log is refused, naming its line."""
    stated: bool | None = log.settings.get("torch_compile")
    if stated is None or torch_compile is None:
        return stated if torch_compile is None else torch_compile
    if stated != torch_compile:
        flag = "--torch-compile" if torch_compile else "--no-torch-compile"
        raise ClusterSimError(
            f"{log.path}, line {log.lines['torch_compile']}: the log ran torch.compile {'on' if stated else 'off'}, "
            f"{flag} says {'on' if torch_compile else 'off'}",
            field=flag,
            value=torch_compile,
        )
    return stated


def refuse_headroom(log: LoggedRun, headroom: float | None) -> None:
    """--headroom shapes a chosen layout; a log that states TP and PP gives the layout."""
    if headroom is not None and {"tp", "pp"} <= set(log.settings):
        raise ClusterSimError(
            f"{log.path}, line {log.lines['tp']}: the log gives the layout (tp {log.settings['tp']}, pp "
            f"{log.settings['pp']}); --headroom is the memory a chosen layout leaves free: drop it",
            field="--headroom",
            value=headroom,
        )


def framework_of(log: LoggedRun, framework: str | None, software: list[Path]) -> str | None:
    """The framework the run is priced as: the log's where --framework names none; a --framework that names
    another packaged framework is refused (a profile of the user's own ``--software`` files is taken as
    theirs of the log's framework)."""
    from clustersim.compute.software import software_profiles

    if framework is None:
        return log.framework
    packaged = software_profiles((), use_env=False)
    if framework.strip().lower() != log.framework and framework.strip().lower() in packaged:
        raise ClusterSimError(
            f"{log.path}: the log is a {log.framework} run, --framework says {framework}",
            field="--framework",
            value=framework,
        )
    return framework


def check_replayed(log: LoggedRun, run: TrainingRun, scenario: Path) -> None:
    """A scenario file's job (``--scenario``) against what the log states: layout, batch, sequence, precision
    and framework."""
    from clustersim.compute.precision import job_dtype, parse_training_format
    from clustersim.compute.software import software_profiles

    layout, job = run.estimate.layout, run.estimate.job
    runs = {
        "tp": layout.tp, "pp": layout.pp, "cp": layout.cp, "ep": layout.ep, "vp": layout.vp,
        "micro_batch": layout.micro_batch, "zero": layout.zero, "sp": layout.sequence_parallel,
        "recompute": layout.recompute.value, "global_batch": job.global_batch, "seq": job.seq_len,
        "torch_compile": run.scenario.torch_compile,
    }  # fmt: skip
    stated = dict(log.settings)
    if "precision" in stated:
        precision = stated.pop("precision")
        if job_dtype(parse_training_format(str(precision), "--log")) != job.precision:
            runs["precision"], stated["precision"] = str(job.precision), precision
    if run.estimate.framework != log.framework and run.estimate.framework in software_profiles((), use_env=False):
        runs["framework"], stated["framework"] = run.estimate.framework, log.framework
    for name, value in stated.items():
        if name in runs and runs[name] != value:
            where = f", line {log.lines[name]}" if name in log.lines else ""
            raise ClusterSimError(
                f"{log.path}{where}: the log says {name} {value}, the scenario {scenario} runs {runs[name]}",
                field="--scenario",
                value=str(scenario),
            )


def check_run(log: LoggedRun, model: Transformer, layout: Layout, nodes: int) -> None:
    """The model's shape, the world size and the data-parallel degree the system gives (``nodes``: --nodes),
    against what the log states."""
    for key in SHAPE:
        mine = (model.kv_heads or model.heads) if key == "kv_heads" else getattr(model, key)  # 0: one per head
        mine = model.expert_ffn if key == "ffn_hidden" else mine  # a MoE log's ffn_hidden is an expert's (ingest)
        if key in log.model and mine != log.model[key]:
            raise ClusterSimError(
                f"{log.path}, line {log.lines[key]}: the log's model has {key} {log.model[key]}, {model.name} has "
                f"{mine}",
                field="MODEL",
                value=model.name,
            )
    world, said = log.world(nodes)
    if world is not None and world != layout.num_devices:
        raise ClusterSimError(
            f"{log.path}, {said}, the system given has {layout.num_devices} (--nodes, --devices-per-node)",
            field="--nodes",
            value=layout.num_devices,
        )
    if log.dp is not None and log.dp != layout.dp:
        raise ClusterSimError(
            f"{log.path}: the log ran data-parallel size {log.dp}, the system given makes it {layout.dp} "
            "(--nodes, --devices-per-node)",
            field="--nodes",
            value=layout.dp,
        )
