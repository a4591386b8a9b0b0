"""Read a Megatron-LM / Megatron-Core training log (also what NeMo 2 and Megatron-Bridge print through
Megatron's ``training_log``) into a ``TrainingRun``.

Understood, with launcher prefixes (``0: ``, ``[1,0]<stdout>:``, ``[rank0]:``) and timestamps:

* the step lines ``iteration N/ M | ... elapsed time per iteration (ms): X | throughput per GPU
  (TFLOP/s/GPU): Y | ... global batch size: G | ...`` (the throughput where ``--log-throughput`` prints it);
* the arguments block (``name ..... value`` lines, read wherever they are, so an excerpt of the block is
  read too): ``num_layers``, ``hidden_size``, ``ffn_hidden_size``, ``num_attention_heads``,
  ``num_query_groups`` (with ``group_query_attention``), ``kv_channels``, ``seq_length``, ``swiglu``,
  ``multi_latent_attention`` (with its ranks and head widths), ``mtp_num_layers``,
  ``num_experts``, ``moe_router_topk`` (with ``moe_ffn_hidden_size``, ``moe_shared_expert_intermediate_size``,
  ``moe_layer_freq``, ``moe_router_num_groups`` / ``moe_router_group_topk``: an expert's width, the shared experts,
  the leading dense blocks, group-limited routing; the expert layout: ``expert_tensor_parallel_size``, the token
  dispatcher, ``overlap_moe_expert_parallel_comm``),
  ``tensor/pipeline/context/expert_model_parallel_size``,
  ``virtual_pipeline_model_parallel_size``, ``data_parallel_size``, ``world_size``, ``micro_batch_size``,
  ``global_batch_size``, ``sequence_parallel``, ``use_distributed_optimizer``, ``recompute_granularity``
  (or the older ``checkpoint_activations``) with a selective recompute's ``recompute_modules``,
  ``bf16``/``fp16``/``fp8`` (with ``fp8_recipe``: mxfp8 is its own format) / ``fp4`` (with ``fp4_recipe`` nvfp4),
  whether it captured CUDA graphs (``cuda_graph_impl``, ``cuda_graph_scope``: software ``cuda_graphs``, whose none
  prices a MoE step's wait for its host's launches, ``clustersim.training.host_launches``), the layers an 8- or
  4-bit run keeps in BF16 (``first_last_layers_bf16``: software ``bf16_layers``);
* ``using world size: W, data-parallel size: D, ... tensor-model-parallel size: T, pipeline-model-parallel
  size: P``, ``> initialized tensor/pipeline model parallel with size N``, ``> padded vocab (size: V) with N
  dummy tokens (new size: P)`` and ``using torch.float16/bfloat16 for parameters``.

A ``deepspeed ... True`` argument makes it a Megatron-DeepSpeed run (``software.framework: megatron-deepspeed``,
``zero_stage`` its ZeRO stage, ``num_key_value_heads`` its GQA groups, ``num_experts`` printed as a list).

Refused, naming the file and line: a step line cut before its time, a time or throughput that is not a
positive number, two lines stating one setting differently. Megatron's TFLOP/s counts model FLOPs without
recompute (``num_floating_point_operations`` in megatron/training/training.py), so it is read as
``model_tflops_per_device``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from clustersim.choices import recompute_modules_named
from clustersim.compute.precision import QUANTIZED_FORMATS
from clustersim.errors import ClusterSimError
from clustersim.ingest.text import read_output
from clustersim.ingest.training_run import Step, TrainingRun

STEP_MARK = "elapsed time per iteration (ms)"
_PREFIX = re.compile(r"^\s*(?:\[[^\]]*\]<std(?:out|err)>:|\[rank\d+\]:|\d+:)\s?")
_ARG = re.compile(r"^\s*([a-z][a-z0-9_]*) \.{3,} (.*?)\s*$")
_ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_FIELD = re.compile(r"([A-Za-z][^|:]*?)\s*:\s*([^|]*?)\s*(?=\||$)")
_WORLD = re.compile(r"using world size:\s*(\d+)")
_SIZES = {
    "dp": re.compile(r"data-parallel[- ]size:\s*(\d+)"),
    "cp": re.compile(r"context-parallel size:\s*(\d+)"),
    "tp": re.compile(r"tensor-model-parallel size:\s*(\d+)"),
    "pp": re.compile(r"pipeline-model-parallel size:\s*(\d+)"),
}
_INITIALIZED = re.compile(r"> initiali[sz](?:ed|ing) (tensor|pipeline) model parallel with size (\d+)")
_PADDED = re.compile(r"padded vocab \(size: \d+\) with \d+ dummy tokens \(new size: (\d+)\)")
_PARAMS = re.compile(r"using torch\.(float16|bfloat16|float32) for parameters")
_INT_ARGS = {
    "num_layers": ("model", "layers"),
    "hidden_size": ("model", "hidden"),
    "ffn_hidden_size": ("model", "ffn_hidden"),
    "num_attention_heads": ("model", "heads"),
    "kv_channels": ("model", "head_dim"),
    "mtp_num_layers": ("model", "mtp_layers"),
    "seq_length": ("model", "seq_len"),
    "tensor_model_parallel_size": ("parallel", "tp"),
    "pipeline_model_parallel_size": ("parallel", "pp"),
    "context_parallel_size": ("parallel", "cp"),
    "expert_model_parallel_size": ("parallel", "ep"),
    "virtual_pipeline_model_parallel_size": ("parallel", "vp"),
    "data_parallel_size": ("parallel", "dp"),
    "micro_batch_size": ("parallel", "micro_batch"),
    "global_batch_size": ("parallel", "global_batch"),
}


def looks_like_megatron(text: str) -> bool:
    """Whether ``text`` is a Megatron training log (its step lines)."""
    return STEP_MARK in text


def read_megatron_log(path: str | Path) -> TrainingRun:
    """The steps and stated settings of the Megatron log ``path`` (see the module's docstring)."""
    path = Path(path)
    text = read_output(path)
    run = TrainingRun(str(path), "megatron", "Megatron-LM training log")
    args: dict[str, tuple[str, int]] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _PREFIX.sub("", raw, count=1)
        arg = _ARG.match(line)
        if arg:
            value = re.sub(r"\.{3,}\s*(default|updated)$", "", arg.group(2)).strip()
            args.setdefault(arg.group(1), (value, number))
            continue
        if _ITERATION.search(line):
            run.steps.append(_step(path, line, number))
            continue
        _init_line(run, line, number)
    _apply_args(run, args)
    return run


def _init_line(run: TrainingRun, line: str, number: int) -> None:
    world = _WORLD.search(line)
    if world:
        run.world_size = int(world.group(1))
        run.lines["world_size"] = number
        for key, pattern in _SIZES.items():
            found = pattern.search(line)
            if found:
                run.state("parallel", key, int(found.group(1)), number)
    initialized = _INITIALIZED.search(line)
    if initialized:
        run.state("parallel", "tp" if initialized.group(1) == "tensor" else "pp", int(initialized.group(2)), number)
    padded = _PADDED.search(line)
    if padded:
        run.state("model", "vocab", int(padded.group(1)), number)
    params = _PARAMS.search(line)
    if params and params.group(1) != "float32":
        run.precision = {"float16": "fp16", "bfloat16": "bf16"}[params.group(1)]
        run.lines.setdefault("precision", number)


def _step(path: Path, line: str, number: int) -> Step:
    match = _ITERATION.search(line)
    assert match is not None
    fields = {key.strip(): value for key, value in _FIELD.findall(line[match.end() :])}
    where = f"{path}, line {number}"
    if "elapsed time per iteration (ms)" not in fields:
        raise ClusterSimError(f"{where}: iteration {match.group(1)} has no elapsed time (a line cut short?)")
    values = {"step_time_s": _positive(fields["elapsed time per iteration (ms)"], "elapsed time", where) / 1e3}
    throughput = fields.get("throughput per GPU (TFLOP/s/GPU)")
    if throughput is not None:
        values["model_tflops_per_device"] = _positive(throughput, "throughput per GPU", where)
    batch = fields.get("global batch size")
    global_batch = int(_positive(batch, "global batch size", where)) if batch else None
    return Step(int(match.group(1)), number, values, global_batch)


def _positive(text: str, name: str, where: str) -> float:
    try:
        value = float(text.split("/")[0])  # a fork may print 'this rank/all ranks'
    except ValueError:
        raise ClusterSimError(f"{where}: {name} is {text!r}, not a number", field=name, value=text) from None
    if not math.isfinite(value) or value <= 0:
        raise ClusterSimError(f"{where}: {name} is {text!r}; valid: a number > 0", field=name, value=text)
    return value


def _apply_args(run: TrainingRun, args: dict[str, tuple[str, int]]) -> None:
    for name, (group, key) in _INT_ARGS.items():
        if name in args and args[name][0] not in ("None", ""):
            value, line = args[name]
            try:
                run.state(group, key, int(value), line)
            except ValueError:
                raise ClusterSimError(f"{run.path}, line {line}: {name} is {value!r}, not an integer") from None
    if "world_size" in args:
        run.world_size, run.lines["world_size"] = int(args["world_size"][0]), args["world_size"][1]
    flag = {name: (value == "True", line) for name, (value, line) in args.items() if value in ("True", "False")}
    if "group_query_attention" in flag and "num_query_groups" in args:
        value, line = args["num_query_groups"]
        groups = int(value) if flag["group_query_attention"][0] and value != "None" else run.model.get("heads")
        if groups is not None:
            run.state("model", "kv_heads", groups, line)
    if "swiglu" in flag:
        run.state("model", "ffn_type", "swiglu" if flag["swiglu"][0] else "gelu", flag["swiglu"][1])
    if "num_key_value_heads" in args and args["num_key_value_heads"][0].isdigit():  # Megatron-DeepSpeed's name
        run.state("model", "kv_heads", int(args["num_key_value_heads"][0]), args["num_key_value_heads"][1])
    experts = args.get("num_experts")
    count = re.findall(r"\d+", experts[0]) if experts else []  # Megatron-DeepSpeed prints a list: [1]
    if experts and count and int(count[0]) > 1:
        _experts(run, args, int(count[0]), experts[1])
    if flag.get("deepspeed", (False, 0))[0]:
        run.framework, run.version = "megatron-deepspeed", "Megatron-DeepSpeed training log"
        if "zero_stage" in args and args["zero_stage"][0].isdigit():
            run.state("parallel", "zero", int(args["zero_stage"][0]), args["zero_stage"][1])
    if "sequence_parallel" in flag:
        run.state("parallel", "sequence_parallel", flag["sequence_parallel"][0], flag["sequence_parallel"][1])
    if "use_distributed_optimizer" in flag:
        sharded, line = flag["use_distributed_optimizer"]
        run.state("parallel", "zero", 1 if sharded else 0, line)
    if flag.get("multi_latent_attention", (False, 0))[0]:
        _latent_attention(run, args, flag["multi_latent_attention"][1])
    _recompute(run, args)
    _precision(run, args)
    _cuda_graphs(run, args)
    _bf16_layers(run, args)


def _bf16_layers(run: TrainingRun, args: dict[str, tuple[str, int]]) -> None:
    """The layers an 8- or 4-bit run keeps in BF16, where ``first_last_layers_bf16`` is set: its
    ``num_layers_at_start_in_bf16`` plus ``num_layers_at_end_in_bf16`` (Megatron-Core's TransformerConfig defaults,
    1 and 1, where an excerpt leaves them out) as software ``bf16_layers`` (``clustersim.compute.bf16_layers``); in a
    16-bit run, whose layers all are, the flag is only noted."""
    flag = args.get("first_last_layers_bf16")
    if flag is None or flag[0] != "True":
        return
    ends = [args.get(name, ("1", flag[1])) for name in ("num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16")]
    for (value, line), name in zip(ends, ("start", "end"), strict=True):
        if not value.isdigit():
            raise ClusterSimError(f"{run.path}, line {line}: num_layers_at_{name}_in_bf16 is {value!r}, not a count")
    if run.precision not in QUANTIZED_FORMATS:
        run.notes.append(f"first_last_layers_bf16 in a {run.precision or '16-bit'} run (line {flag[1]}): no effect")
        return
    count = int(ends[0][0]) + int(ends[1][0])
    run.state("software", "bf16_layers", count, flag[1])
    run.notes.append(
        f"{count} layers in BF16 (first_last_layers_bf16, line {flag[1]}: {ends[0][0]} at the start, {ends[1][0]} at "
        "the end; software.bf16_layers)"
    )


def _cuda_graphs(run: TrainingRun, args: dict[str, tuple[str, int]]) -> None:
    """Whether the run captured CUDA graphs, where the log says (software ``cuda_graphs``, and the case's notes):
    none (``cuda_graph_impl none``, or the older ``enable_cuda_graph`` / ``external_cuda_graph`` False), full
    (a ``cuda_graph_scope`` of ``full_iteration``) or partial (any other capture)."""
    stated = [args[name] for name in ("cuda_graph_impl", "enable_cuda_graph", "external_cuda_graph") if name in args]
    if not stated:
        return
    captured = [value for value, _ in stated if value not in ("none", "None", "False")]
    scope = args.get("cuda_graph_scope", ("", 0))[0]
    state = "none" if not captured else "full" if "full_iteration" in scope else "partial"
    run.state("software", "cuda_graphs", state, stated[0][1])
    run.notes.append(f"CUDA graphs: {state} (line {stated[0][1]}; software.cuda_graphs)")


def _experts(run: TrainingRun, args: dict[str, tuple[str, int]], experts: int, line: int) -> None:
    """A MoE run's experts as the case format holds them: ``ffn_hidden`` an expert's width (Megatron-Core's
    ``moe_ffn_hidden_size``, its ``ffn_hidden_size`` where none is printed), ``moe_shared_expert_intermediate_size``
    as that many experts' width, and the leading dense blocks of a ``moe_layer_freq`` list (``[0, 0, 0, 1, ...]``:
    ``dense_layers`` of ``dense_ffn_hidden``, the printed ``ffn_hidden_size``); a pattern the format cannot hold (a
    MoE block every k-th layer) is refused, naming the line."""
    topk = args.get("moe_router_topk", ("2", line))[0]
    moe = {"experts": experts, "top_k": int(topk), "shared_experts": 0}
    groups, group_top_k = (
        _count_arg(run, args, "moe_router_num_groups")[0],
        _count_arg(run, args, "moe_router_group_topk")[0],
    )
    if groups and group_top_k:  # group-limited routing (DeepSeek-V3's node-limited experts)
        moe |= {"groups": groups, "group_top_k": group_top_k}
    width, width_line = _count_arg(run, args, "moe_ffn_hidden_size")
    dense = run.model.get("ffn_hidden")
    expert = width or dense
    shared, shared_line = _count_arg(run, args, "moe_shared_expert_intermediate_size")
    if shared and expert:
        if shared % expert:
            raise ClusterSimError(
                f"{run.path}, line {shared_line}: moe_shared_expert_intermediate_size {shared} is not a whole number "
                f"of experts of width {expert} (valid: a multiple of it)",
                field="moe_shared_expert_intermediate_size",
                value=shared,
            )
        moe["shared_experts"] = shared // expert
    run.state("model", "moe", moe, line)
    _expert_layout(run, args)
    leading = _dense_blocks(run, *args.get("moe_layer_freq", ("1", line)))
    if leading and dense is None:
        run.notes.append(f"moe_layer_freq: {leading} leading dense blocks, of a width not printed: not recorded")
    elif leading:
        run.state("model", "dense_layers", leading, args["moe_layer_freq"][1])
        run.state("model", "dense_ffn_hidden", dense, run.lines["ffn_hidden"])
    if width is not None and width != dense:
        run.model["ffn_hidden"], run.lines["ffn_hidden"] = width, width_line  # an expert's, as the format has it


def _latent_attention(run: TrainingRun, args: dict[str, tuple[str, int]], line: int) -> None:
    """DeepSeek's latent attention (``multi_latent_attention``) in the case format's ``mla``: ``q_lora_rank`` (0
    where printed None: no query compression), ``kv_lora_rank``, ``qk_head_dim``, ``qk_pos_emb_head_dim`` and
    ``v_head_dim``; one of the last four not printed is refused (the attention's shape would be guessed)."""
    mla: dict[str, int] = {"q_lora_rank": _count_arg(run, args, "q_lora_rank")[0] or 0}
    for name in ("kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim"):
        value = _count_arg(run, args, name)[0]
        if value is None:
            raise ClusterSimError(
                f"{run.path}, line {line}: multi_latent_attention is True but {name} is not printed (the latent "
                "attention's shape needs kv_lora_rank, qk_head_dim, qk_pos_emb_head_dim and v_head_dim)",
                field=name,
            )
        mla[name] = value
    run.state("model", "mla", mla, line)


def _expert_layout(run: TrainingRun, args: dict[str, tuple[str, int]]) -> None:
    """A MoE run's expert layout: ``expert_tensor_parallel_size`` (etp), the token dispatcher
    (``moe_token_dispatcher_type`` alltoall, or flex with ``moe_flex_dispatcher_backend`` deepep / hybridep, or the
    older ``moe_enable_deepep``) and ``overlap_moe_expert_parallel_comm`` (ep_overlap). The allgather dispatcher,
    which the format has no name for, is noted and left to the framework's default."""
    etp, etp_line = _count_arg(run, args, "expert_tensor_parallel_size")
    if etp is not None:
        run.state("parallel", "etp", etp, etp_line)
    kind, line = args.get("moe_token_dispatcher_type", ("", 0))
    backend = args.get("moe_flex_dispatcher_backend", ("None", 0))[0]
    deepep = args.get("moe_enable_deepep", ("False", 0))[0] == "True"
    dispatcher = {"alltoall": "alltoall", "flex": backend if backend in ("deepep", "hybridep") else "deepep"}.get(kind)
    if deepep and kind in ("flex", ""):
        dispatcher = "deepep"
    if dispatcher is not None:
        run.state("parallel", "ep_dispatcher", dispatcher, line)
    elif kind:
        run.notes.append(f"moe_token_dispatcher_type {kind} (line {line}): not in the case format, the framework's")
    overlap = args.get("overlap_moe_expert_parallel_comm")
    if overlap is not None and overlap[0] in ("True", "False"):
        run.state("parallel", "ep_overlap", overlap[0] == "True", overlap[1])


def _dense_blocks(run: TrainingRun, freq: str, line: int) -> int:
    """The leading dense blocks a ``moe_layer_freq`` states: 0 for 1 (every block a MoE one), the leading 0s of a
    list of 0s then 1s; any other pattern is refused."""
    pattern = [int(bit) for bit in re.findall(r"\d+", freq)]
    if pattern == [1] and not freq.strip().startswith("["):
        return 0
    leading = next((i for i, bit in enumerate(pattern) if bit), len(pattern))
    if freq.strip().startswith("[") and pattern and leading < len(pattern) and set(pattern[leading:]) == {1}:
        return leading
    raise ClusterSimError(
        f"{run.path}, line {line}: moe_layer_freq {freq!r} is not read into a case (valid: 1, every block a MoE one, "
        "or a list of 0s then 1s: leading dense blocks, then MoE ones)",
        field="moe_layer_freq",
        value=freq,
    )


def _count_arg(run: TrainingRun, args: dict[str, tuple[str, int]], name: str) -> tuple[int | None, int]:
    """A positive whole-number argument and its line; (None, 0) where it is not printed or printed None."""
    if name not in args or args[name][0] in ("None", ""):
        return None, 0
    value, line = args[name]
    if not value.isdigit() or int(value) <= 0:
        raise ClusterSimError(f"{run.path}, line {line}: {name} is {value!r} (valid: a whole number > 0)", field=name)
    return int(value), line


def _recompute(run: TrainingRun, args: dict[str, tuple[str, int]]) -> None:
    granularity = args.get("recompute_granularity")
    if granularity is not None:
        value = {"None": "none", "full": "full", "selective": "selective"}.get(granularity[0])
        if value is None:
            raise ClusterSimError(f"{run.path}, line {granularity[1]}: recompute_granularity {granularity[0]!r}")
        run.state("parallel", "recompute", value, granularity[1])
        if value == "selective" and args.get("recompute_modules", ("None",))[0] != "None":
            _recompute_modules(run, *args["recompute_modules"])
    elif "checkpoint_activations" in args:  # Megatron-LM before 2022
        value, line = args["checkpoint_activations"]
        run.state("parallel", "recompute", "full" if value == "True" else "none", line)


def _recompute_modules(run: TrainingRun, text: str, line: int) -> None:
    """The modules a selective recompute runs again, as Megatron-Core prints its ``recompute_modules`` list
    (``['moe_act', 'layernorm']``); a name clustersim does not price is refused, naming the line."""
    said = f"{run.path}, line {line}: recompute_modules {text!r}"
    modules = recompute_modules_named(re.findall(r"[A-Za-z_]+", text), said, "recompute_modules", text)
    run.state("parallel", "recompute_modules", [module.value for module in modules], line)


def _precision(run: TrainingRun, args: dict[str, tuple[str, int]]) -> None:
    """The GEMMs' format: 4-bit where ``fp4`` is set (Megatron-Core's ``--fp4-format``; ``fp4_recipe`` nvfp4, the
    only 4-bit recipe the format names), else 8-bit where ``fp8`` is (``mxfp8`` where ``fp8_recipe`` says so, the
    block-scaled format), else bf16 / fp16; the recipe is noted."""
    fp4, fp8 = args.get("fp4"), args.get("fp8")
    if fp4 is not None and fp4[0] not in ("None", "False"):
        recipe = args.get("fp4_recipe", ("nvfp4", fp4[1]))[0]
        if recipe != "nvfp4":
            raise ClusterSimError(
                f"{run.path}, line {fp4[1]}: fp4_recipe {recipe!r} is not read into a case (valid: nvfp4)",
                field="fp4_recipe",
                value=recipe,
            )
        run.precision, run.lines["precision"] = "nvfp4", fp4[1]
        run.notes.append(f"fp4 format {fp4[0]}, recipe nvfp4 (line {fp4[1]})")
        return
    if fp8 is not None and fp8[0] not in ("None", "False"):
        recipe = args.get("fp8_recipe", ("", fp8[1]))[0]
        run.precision, run.lines["precision"] = ("mxfp8" if recipe == "mxfp8" else "fp8"), fp8[1]
        run.notes.append(f"fp8 format {fp8[0]}{f', recipe {recipe}' if recipe else ''} (line {fp8[1]})")
        return
    for name in ("bf16", "fp16"):
        if args.get(name, ("",))[0] == "True":
            run.precision, run.lines["precision"] = name, args[name][1]
            return
