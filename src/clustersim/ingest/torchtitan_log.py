"""Read a torchtitan training log into a ``TrainingRun``.

Understood, with ``[rankN]:`` prefixes and several ranks printing one step (the first line of each step
is kept): the metric lines ``step: N  loss: L  [grad_norm: G]  memory: M GiB(P%)  tps: T  tflops: F  mfu: U%``
(``wps`` and no ``tflops`` in 2024 versions; ``tps`` is tokens per second per device and ``tflops`` model
FLOPs per device, as torchtitan/components/metrics.py computes them; ``mfu: N/A`` is left out); where present, the job's
``Training starts at step 1, with local batch size B, global batch size G, sequence length S`` line (``Trainer is
initialized with local batch size B, global batch size G, [gradient accumulation steps N,] sequence length S`` since
2025), ``Building N-D device mesh with [names], [sizes]``, and the launch line a log or issue often starts with
(``NGPU=4 ... ./run_train.sh --parallelism.context_parallel_degree 2 --activation_checkpoint.mode full
--training.seq_len 8192 --model.converters float8``). torchtitan shards data parallel with FSDP by default
(``data_parallel_shard_degree -1``): the case records ``zero: 3``; the number format is bf16 (its default
``mixed_precision_param``) unless a float8 converter is named; both are said in the case's notes.

The world size is the device mesh's product (the mesh holds every rank) where one is printed; else run_train.sh's
``NGPU`` (torchrun's ``--nproc_per_node``: ranks per node) times torchrun's ``--nnodes`` or the command line's
``--nodes`` (``TrainingRun.world``). Whether the run compiled (``software.compiled``): true on the line torchtitan's
apply_compile prints or a ``--compile.enable`` (``--training.compile``) flag, false on ``=false`` or where the model
is wrapped (``Applied FSDP to the model``) with no block compiled, None where the log says neither.

Refused, naming the file and line: a metric line cut before its ``mfu``, a value that is not a number.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from clustersim.errors import ClusterSimError
from clustersim.ingest.text import read_output
from clustersim.ingest.training_run import Step, TrainingRun

_STEP = re.compile(r"\bstep:\s*(\d+)\s+loss:")
_METRICS = re.compile(r"\b[tw]ps:\s*([\d,.]+)\s+(?:tflops:\s*([\d,.]+)\s+)?mfu:\s*([\d.]+%|N/A)")
_STARTS = re.compile(
    r"Training starts at step \d+, with local batch size (\d+), global batch size (\d+), sequence length (\d+)"
)
_INITIALIZED = re.compile(
    r"Trainer is initialized with local batch size (\d+), global batch size (\d+),(?: gradient accumulation steps "
    r"\d+,)? sequence length (\d+)"
)
_MESH = re.compile(r"Building \d+-D device mesh with \[([^\]]*)\], \[([^\]]*)\]")
_NGPU = re.compile(r"\bNGPU=\"?(\d+)|--nproc[_-]per[_-]node[ =]\"?(\d+)\b")
_NNODES = re.compile(r"--nnodes[ =]\"?(\d+)\b(?!:)")
# torchtitan's apply_compile (models/llama3/infra/parallelize.py; "Compiled each ..." in 2024) and its flags
# (--training.compile until 2025, then --compile.enable); "Applied FSDP/HSDP/DDP to the model" is printed after
# apply_compile would have been, so a log that shows it with neither ran eager.
_COMPILED = re.compile(r"Compil(?:ing|ed) each TransformerBlock with torch\.compile")
_COMPILE_FLAG = re.compile(
    r"--(?:compile\.enable|training\.compile)(?![\w.-])(?:[ =]\"?(true|false)\b)?", re.IGNORECASE
)
_PARALLELIZED = re.compile(r"Applied (?:FSDP|HSDP|DDP) to the model")
_DEGREE = re.compile(r"--parallelism\.(\w+?)_degree[ =]\"?(-?\d+)")
_TRAINING = re.compile(r"--training\.(global_batch_size|seq_len)[ =]\"?(\d+)")
_CHECKPOINT = re.compile(r"--activation_checkpoint\.mode[ =]\"?(\w+)")
_FLOAT8 = re.compile(r"--model\.converters[ =]\"?[\w,]*float8|Float8 training active", re.IGNORECASE)
_DEGREES = {
    "tensor_parallel": "tp",
    "pipeline_parallel": "pp",
    "context_parallel": "cp",
    "expert_parallel": "ep",
    "data_parallel_shard": "dp_shard",
    "data_parallel_replicate": "dp_replicate",
}
_MESH_NAMES = {"tp": "tp", "pp": "pp", "cp": "cp", "dp_shard": "dp_shard", "dp_replicate": "dp_replicate"}


def looks_like_torchtitan(text: str) -> bool:
    """Whether ``text`` is a torchtitan training log (its metric lines)."""
    return bool(_STEP.search(text)) and "mfu:" in text and ("tps:" in text or "wps:" in text)


def read_torchtitan_log(path: str | Path) -> TrainingRun:
    """The steps and stated settings of the torchtitan log ``path`` (see the module's docstring)."""
    path = Path(path)
    text = read_output(path)
    run = TrainingRun(str(path), "torchtitan", "torchtitan training log")
    degrees: dict[str, int] = {}
    seen: set[int] = set()
    fp8 = False
    parallelized = None  # the line saying the model was wrapped (FSDP, HSDP, DDP)
    for number, line in enumerate(text.splitlines(), start=1):
        step = _STEP.search(line)
        if step:
            if int(step.group(1)) not in seen:
                seen.add(int(step.group(1)))
                run.steps.append(_step(path, line, number, int(step.group(1))))
            continue
        _settings(run, line, number, degrees)
        _compile(run, line, number)
        fp8 = fp8 or bool(_FLOAT8.search(line))
        parallelized = parallelized or (number if _PARALLELIZED.search(line) else None)
    _layout(run, degrees)
    if run.compiled is None and parallelized is not None:
        run.state("software", "compiled", False, parallelized)
    run.notes.append(_compile_said(run))
    run.precision = "fp8" if fp8 else "bf16"
    run.notes.append(
        "float8 converter named: fp8" if fp8 else "no float8 converter named: bf16 (torchtitan's mixed_precision_param)"
    )
    return run


def _step(path: Path, line: str, number: int, step: int) -> Step:
    where = f"{path}, line {number}"
    metrics = _METRICS.search(line)
    if metrics is None:
        raise ClusterSimError(f"{where}: step {step} has no 'tps: ... tflops: ... mfu: ...%' (a line cut short?)")
    values = {"tokens_per_s_per_device": _number(metrics.group(1), "tps", where)}
    if metrics.group(2) is not None:
        values["model_tflops_per_device"] = _number(metrics.group(2), "tflops", where)
    mfu = metrics.group(3)
    if mfu and mfu != "N/A":
        values["mfu"] = _number(mfu.rstrip("%"), "mfu", where) / 100
    return Step(step, number, values)


def _number(text: str, name: str, where: str) -> float:
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        raise ClusterSimError(f"{where}: {name} is {text!r}, not a number", field=name, value=text) from None
    if not math.isfinite(value) or value < 0:
        raise ClusterSimError(f"{where}: {name} is {text!r}; valid: a number >= 0", field=name, value=text)
    return value


def _compile(run: TrainingRun, line: str, number: int) -> None:
    """torch.compile on where a line says so: the blocks compiled, or the flag (``=false``: off)."""
    flag = _COMPILE_FLAG.search(line)
    said = True if _COMPILED.search(line) else None
    if flag and said is None:
        said = (flag.group(1) or "true").lower() == "true"
    if said is not None:
        run.state("software", "compiled", said, number)


def _compile_said(run: TrainingRun) -> str:
    if run.compiled is None:
        return "torch.compile: the log does not say (compiled null: torchtitan's default, eager)"
    how = "on" if run.compiled else "off (the model wrapped with no block compiled)"
    return f"torch.compile {how}: line {run.lines['compiled']}"


def _settings(run: TrainingRun, line: str, number: int, degrees: dict[str, int]) -> None:
    starts = _STARTS.search(line) or _INITIALIZED.search(line)
    if starts:
        run.state("parallel", "global_batch", int(starts.group(2)), number)
        run.state("model", "seq_len", int(starts.group(3)), number)
    mesh = _MESH.search(line)
    if mesh:
        names = [n.strip().strip("'\"") for n in mesh.group(1).split(",")]
        sizes = [int(s) for s in mesh.group(2).split(",") if s.strip()]
        for name, size in zip(names, sizes, strict=False):
            if name in _MESH_NAMES:
                degrees[_MESH_NAMES[name]] = size
                run.lines.setdefault(_MESH_NAMES[name], number)
        if run.world_size is None:  # the mesh holds every rank: the product of its sizes is the world
            run.world_size, run.lines["world_size"] = math.prod(sizes), number
    gpus = _NGPU.search(line)
    if gpus:  # run_train.sh's NGPU is torchrun's --nproc_per_node: ranks on each node
        run.state("system", "ranks_per_node", int(gpus.group(1) or gpus.group(2)), number)
    nodes = _NNODES.search(line)
    if nodes:
        run.state("system", "nodes", int(nodes.group(1)), number)
    for name, value in _DEGREE.findall(line):
        if name in _DEGREES and int(value) > 0:
            degrees[_DEGREES[name]] = int(value)
            run.lines.setdefault(_DEGREES[name], number)
    for name, value in _TRAINING.findall(line):
        key = "global_batch" if name == "global_batch_size" else "seq_len"
        run.state("parallel" if key == "global_batch" else "model", key, int(value), number)
    checkpoint = _CHECKPOINT.search(line)
    if checkpoint:
        mode = {"full": "full", "selective": "selective", "none": "none"}.get(checkpoint.group(1))
        if mode is None:
            raise ClusterSimError(f"{run.path}, line {number}: activation_checkpoint.mode {checkpoint.group(1)!r}")
        run.state("parallel", "recompute", mode, number)


def _layout(run: TrainingRun, degrees: dict[str, int]) -> None:
    for key in ("tp", "pp", "cp", "ep"):
        if key in degrees:
            run.state("parallel", key, degrees[key], run.lines[key])
    shard, replicate = degrees.get("dp_shard"), degrees.get("dp_replicate")
    if shard is not None or replicate is not None:
        run.state("parallel", "dp", (shard or 1) * (replicate or 1), run.lines.get("dp_shard", 1))
    if shard is None or shard > 1:  # the default -1 shards every rank left over
        run.parallel["zero"] = 3
        run.notes.append("data parallel sharded with FSDP (torchtitan's default): zero 3")
