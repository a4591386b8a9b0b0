"""How a training job is laid out on its devices, and the checks that make a layout possible.

``tp * pp * dp * cp`` ranks cover the devices; expert parallelism (``ep``) is carved out of the
data-parallel ranks (Megatron-LM), or where ``ep`` is wider than ``dp * cp`` or the layout states an
expert tensor-parallel degree (``etp``), folded over all ``tp * cp * dp`` ranks of a stage (Megatron-Core's
MoE parallel folding: ``ep * etp`` divides them). ``vp`` model chunks per pipeline rank
give the interleaved 1F1B schedule. Gradient accumulation follows: ``global_batch / (dp * micro_batch)``
micro-batches per step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clustersim.choices import EP_DISPATCHER_HELP, RECOMPUTE_MODULES_HELP, EpDispatcher, RecomputeModule
from clustersim.choices import Recompute as Recompute  # re-exported: defined with the light enums
from clustersim.errors import ClusterSimError, validation_problems
from clustersim.recompute_layout import bits_modules, module_bits, modules_allowed, modules_message
from clustersim.workload.transformer import Transformer

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class Layout(BaseModel):
    """A parallel layout. Degrees are counts of ranks; ``micro_batch`` is in sequences."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tp: int = Field(default=1, ge=1, description="Tensor parallel degree.")
    pp: int = Field(default=1, ge=1, description="Pipeline parallel degree.")
    dp: int = Field(default=1, ge=1, description="Data parallel degree (model replicas).")
    cp: int = Field(default=1, ge=1, description="Context parallel degree (sequence split for attention).")
    ep: int = Field(default=1, ge=1, description="Expert parallel degree (within the data-parallel ranks).")
    etp: int | None = Field(
        default=None,
        ge=1,
        description="Expert tensor-parallel degree (Megatron-Core's expert_tensor_parallel_size); None: derived "
        "(tp, or tp*cp*dp/ep where ep is wider than dp*cp).",
    )
    vp: int = Field(default=1, ge=1, description="Model chunks per pipeline rank (interleaved 1F1B).")
    micro_batch: int = Field(default=1, ge=1, description="Sequences per micro-batch.")
    zero: int = Field(default=0, ge=0, le=3, description="ZeRO stage: 1 optimizer, 2 +gradients, 3 +weights (FSDP).")
    sequence_parallel: bool = Field(default=False, description="Megatron sequence parallelism (needs tp > 1).")
    recompute: Recompute = Field(default=Recompute.NONE, description="Activation recompute.")
    recompute_modules: tuple[RecomputeModule, ...] | None = Field(default=None, description=RECOMPUTE_MODULES_HELP)
    tp_overlap: bool | None = Field(
        default=None, description="Overlap tensor-parallel communication with GEMMs (None: the family's default)."
    )
    ep_overlap: bool | None = Field(
        default=None,
        description="Overlap expert all-to-alls with another micro-batch's compute (None: the framework's default).",
    )
    ep_dispatcher: EpDispatcher | None = Field(default=None, description=EP_DISPATCHER_HELP)
    dp_overlap: bool = Field(default=True, description="Overlap data-parallel communication with compute.")
    uneven_stages: bool = Field(
        default=False, description="Allow pipeline stages with different layer counts (layers not divisible by pp*vp)."
    )
    last_stage_layers: int | None = Field(
        default=None,
        ge=1,
        description="Decoder layers on the last pipeline rank, which also runs the output head and any MTP block "
        "(Megatron-Core's --decoder-last-pipeline-num-layers or a pipeline layout's last rank); the other ranks "
        "share the rest evenly. None: an even split.",
    )
    offload_layers: int | None = Field(
        default=None,
        ge=1,
        description="Decoder layers whose activations go to host memory in the forward pass and come back for the "
        "backward (Megatron-Core's cpu_offloading_num_layers); None: none. Needs pp 1 and no recompute.",
    )

    @property
    def num_devices(self) -> int:
        """Devices the layout covers."""
        return self.tp * self.pp * self.dp * self.cp

    def num_micro_batches(self, global_batch: int) -> int:
        """Micro-batches per step and pipeline (gradient accumulation steps)."""
        return global_batch // (self.dp * self.micro_batch)

    def describe(self) -> str:
        """One line, e.g. ``tp 8 pp 4 vp 2 dp 16 mb 1 zero 1 sp recompute selective``."""
        parts = [f"tp {self.tp}", f"pp {self.pp}"]
        parts += [f"vp {self.vp}"] if self.vp > 1 else []
        parts += [f"last stage {self.last_stage_layers} layers"] if self.last_stage_layers else []
        parts += [f"dp {self.dp}"]
        parts += [f"cp {self.cp}"] if self.cp > 1 else []
        parts += [f"ep {self.ep}"] if self.ep > 1 else []
        parts += [f"etp {self.etp}"] if self.etp is not None else []
        parts += [f"dispatch {self.ep_dispatcher.value}"] if self.ep_dispatcher is not None else []
        parts += [f"mb {self.micro_batch}", f"zero {self.zero}"]
        parts += ["sp"] if self.sequence_parallel else []
        parts += [f"recompute {self.recompute.value}"]
        parts += [f"({' '.join(m.value for m in self.recompute_modules)})"] if self.recompute_modules else []
        parts += [f"offload {self.offload_layers} layers"] if self.offload_layers else []
        return " ".join(parts)

    def check(self, model: Transformer, *, num_devices: int, global_batch: int, seq_len: int) -> None:
        """Raise ``ClusterSimError`` naming the first rule of ``LAYOUT_RULES`` the layout breaks."""
        inputs = RuleInputs(model, num_devices, global_batch, seq_len)
        raise_first_broken(self, inputs, LAYOUT_RULES, lambda: f"impossible layout ({self.describe()})")


def layout_from_mapping(data: dict[str, Any], where: str = "layout") -> Layout:
    """A ``Layout`` from plain data (null values take defaults); errors name field, value and rule."""
    clean = {key: value for key, value in data.items() if value is not None}
    try:
        return Layout.model_validate(clean)
    except ValidationError as exc:
        problems = validation_problems(exc.errors())
        raise ClusterSimError(f"{where}: {problems}") from None


@dataclass(frozen=True)
class LayoutArrays:
    """Many layouts as parallel numpy arrays, for evaluating them in one vectorized call."""

    tp: IntArray
    pp: IntArray
    dp: IntArray
    cp: IntArray
    ep: IntArray
    vp: IntArray
    micro_batch: IntArray
    zero: IntArray
    sequence_parallel: BoolArray
    recompute_full: BoolArray
    recompute_selective: BoolArray
    tp_overlap: npt.NDArray[np.float64]  # 1 on, 0 off, NaN: the accelerator family's default
    dp_overlap: BoolArray
    ep_overlap: npt.NDArray[np.float64]  # 1 on, 0 off, NaN: the framework's default
    uneven_stages: BoolArray
    etp_stated: IntArray | None = None  # a layout's stated expert TP degree, 0 where derived (None: all derived)
    ep_per_node: npt.NDArray[np.float64] | None = None  # 1 deepep, 0 alltoall, NaN: the framework's (None: all NaN)
    last_stage_layers: IntArray | None = None  # a layout's stated last-stage layers, 0 for an even split (None: all)
    offload_layers: IntArray | None = None  # layers whose activations go to host memory, 0 for none (None: all 0)
    recompute_modules: IntArray | None = None  # stated selective modules as bits (module_bits), 0: the framework's

    def __post_init__(self) -> None:
        for name in ("etp_stated", "last_stage_layers", "offload_layers", "recompute_modules"):  # unstated: 0
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.zeros(len(self.tp), dtype=np.int64))
        if self.ep_per_node is None:
            object.__setattr__(self, "ep_per_node", np.full(len(self.tp), np.nan))

    @classmethod
    def of(cls, layouts: Sequence[Layout]) -> LayoutArrays:
        """Stack layouts into arrays (one element per layout)."""
        if not layouts:
            raise ClusterSimError("no layouts to evaluate")

        def ints(name: str) -> IntArray:
            return np.array([getattr(layout, name) for layout in layouts], dtype=np.int64)

        def flags(test: Callable[[Layout], bool]) -> BoolArray:
            return np.array([test(layout) for layout in layouts], dtype=bool)

        return cls(
            tp=ints("tp"),
            pp=ints("pp"),
            dp=ints("dp"),
            cp=ints("cp"),
            ep=ints("ep"),
            vp=ints("vp"),
            micro_batch=ints("micro_batch"),
            zero=ints("zero"),
            sequence_parallel=flags(lambda x: x.sequence_parallel),
            recompute_full=flags(lambda x: x.recompute is Recompute.FULL),
            recompute_selective=flags(lambda x: x.recompute is Recompute.SELECTIVE),
            tp_overlap=np.array([np.nan if x.tp_overlap is None else float(x.tp_overlap) for x in layouts]),
            dp_overlap=flags(lambda x: x.dp_overlap),
            ep_overlap=np.array([np.nan if x.ep_overlap is None else float(x.ep_overlap) for x in layouts]),
            uneven_stages=flags(lambda x: x.uneven_stages),
            etp_stated=np.array([layout.etp or 0 for layout in layouts], dtype=np.int64),
            ep_per_node=np.array([_per_node(x.ep_dispatcher) for x in layouts]),
            last_stage_layers=np.array([x.last_stage_layers or 0 for x in layouts], dtype=np.int64),
            offload_layers=np.array([x.offload_layers or 0 for x in layouts], dtype=np.int64),
            recompute_modules=np.array([module_bits(x.recompute_modules) for x in layouts], dtype=np.int64),
        )

    def __len__(self) -> int:
        return len(self.tp)

    @property
    def etp(self) -> IntArray:
        """Expert tensor-parallel degree, one per layout: the stated one, else ``expert_tp``'s."""
        stated = _stated_etp(self)
        return np.asarray(np.where(stated > 0, stated, expert_tp(self.tp, self.cp, self.dp, self.ep)), dtype=np.int64)

    @property
    def ep_stride(self) -> IntArray:
        """How many ranks apart the members of one expert-parallel group are: ``tp * cp`` where the experts
        are carved out of the data-parallel ranks; ``etp`` under Megatron-Core's MoE parallel folding (the
        expert groups built from a stage's ranks in the order etp, ep, expert dp), which ``ep`` wider than
        ``dp * cp`` or a stated ``etp`` implies."""
        inside_dp = ((self.dp * self.cp) % self.ep == 0) & (_stated_etp(self) == 0)
        return np.asarray(np.where(inside_dp, self.tp * self.cp, self.etp), dtype=np.int64)

    @property
    def expert_dp(self) -> IntArray:
        """Ranks holding the same routed experts (which shard and reduce their state): ``tp*cp*dp / (ep*etp)``."""
        return np.asarray(np.maximum(self.tp * self.cp * self.dp // (self.ep * self.etp), 1), dtype=np.int64)

    @property
    def expert_dp_stride(self) -> IntArray:
        """How many ranks apart the members of one expert data-parallel group are: past one expert group."""
        return np.asarray(self.ep_stride * self.ep, dtype=np.int64)

    def select(self, which: npt.NDArray[np.bool_] | npt.NDArray[np.int64]) -> LayoutArrays:
        """The layouts a boolean mask or an index array picks, in that order."""
        return LayoutArrays(**{f.name: getattr(self, f.name)[which] for f in fields(self)})

    def layout(self, index: int) -> Layout:
        """Layout number ``index`` as a ``Layout`` record."""
        overlap, ep_overlap = float(self.tp_overlap[index]), float(self.ep_overlap[index])
        recompute = (
            Recompute.FULL
            if self.recompute_full[index]
            else Recompute.SELECTIVE
            if self.recompute_selective[index]
            else Recompute.NONE
        )
        return Layout(
            tp=int(self.tp[index]),
            pp=int(self.pp[index]),
            dp=int(self.dp[index]),
            cp=int(self.cp[index]),
            ep=int(self.ep[index]),
            vp=int(self.vp[index]),
            micro_batch=int(self.micro_batch[index]),
            zero=int(self.zero[index]),
            sequence_parallel=bool(self.sequence_parallel[index]),
            recompute=recompute,
            tp_overlap=None if np.isnan(overlap) else bool(overlap),
            dp_overlap=bool(self.dp_overlap[index]),
            ep_overlap=None if np.isnan(ep_overlap) else bool(ep_overlap),
            uneven_stages=bool(self.uneven_stages[index]),
            etp=int(_stated_etp(self)[index]) or None,
            ep_dispatcher=_dispatcher(float(self.ep_per_node[index])),  # type: ignore[index]
            last_stage_layers=int(_stated(self, "last_stage_layers")[index]) or None,
            offload_layers=int(_stated(self, "offload_layers")[index]) or None,
            recompute_modules=bits_modules(int(_stated(self, "recompute_modules")[index])),
        )


def expert_tp(tp: Any, cp: Any, dp: Any, ep: Any) -> Any:
    """How many ranks split each expert (scalars or arrays). Experts are carved out of the data-parallel
    ranks (``ep`` divides ``dp * cp``) and split like the dense layers over ``tp``; where ``ep`` is wider,
    Megatron-Core's MoE parallel folding builds the expert groups from all ``tp * cp * dp`` ranks of a
    stage, each expert whole on ``tp * cp * dp / ep`` ranks (expert data parallel 1)."""
    return np.where((dp * cp) % ep == 0, tp, (tp * cp * dp) // ep)


PIPELINE_END_CHUNKS = 2
"""Pipeline chunks uneven stages may spend on the embedding and the loss alone (Megatron-Core's
account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split: each counts as a layer)."""


@dataclass(frozen=True)
class RuleInputs:
    """What the layout rules check a layout against."""

    model: Transformer
    num_devices: int
    global_batch: int
    seq_len: int
    uneven_stages_allowed: bool = True  # whether the caller can offer uneven pipeline stages


@dataclass(frozen=True)
class LayoutRule:
    """One rule a layout must keep: a test and the message that names it. The test reads the layout
    fields by name with operators that hold for one ``Layout`` (Python scalars) and for ``LayoutArrays``
    (numpy arrays) alike, so one definition serves ``Layout.check`` and the planner's masks."""

    name: str
    holds: Callable[[Any, RuleInputs], Any]  # (Layout | LayoutArrays, inputs) -> bool | BoolArray
    message: Callable[[Layout, RuleInputs], str]


def _moe_experts(job: RuleInputs) -> int:
    return job.model.moe.experts if job.model.moe else 1


def _per_node(dispatcher: EpDispatcher | None) -> float:
    """A dispatcher as ``LayoutArrays.ep_per_node`` holds it."""
    return np.nan if dispatcher is None else float(dispatcher is EpDispatcher.DEEPEP)


def _dispatcher(per_node: float) -> EpDispatcher | None:
    """``LayoutArrays.ep_per_node``'s value as a dispatcher name."""
    return None if np.isnan(per_node) else (EpDispatcher.DEEPEP if per_node else EpDispatcher.ALLTOALL)


def _stated_etp(layouts: Any) -> Any:
    """A ``Layout``'s stated expert TP degree or the ``LayoutArrays``' (0 where derived)."""
    return (layouts.etp or 0) if isinstance(layouts, Layout) else layouts.etp_stated


def _stated(layouts: Any, name: str) -> Any:
    """A ``Layout``'s optional count ``name`` (last_stage_layers, offload_layers) or the ``LayoutArrays``' (0: none)."""
    return (getattr(layouts, name) or 0) if isinstance(layouts, Layout) else getattr(layouts, name)


def _offload_allowed(layouts: Any, layers: int) -> Any:
    """Whether a ``Layout`` (or which ``LayoutArrays``) may offload its layers: pp 1, no recompute, fewer than all."""
    if isinstance(layouts, Layout):
        plain = layouts.recompute is Recompute.NONE
    else:
        plain = ~(layouts.recompute_full | layouts.recompute_selective)
    return (layouts.pp == 1) & plain & (_stated(layouts, "offload_layers") < layers)


# Every rule a layout must keep, in the order they are reported. Layout.check raises the first broken
# one; a planner evaluates them all as masks over thousands of candidates (``layout_mask``).
LAYOUT_RULES: tuple[LayoutRule, ...] = (
    LayoutRule(
        "devices",
        lambda a, j: a.tp * a.pp * a.dp * a.cp == j.num_devices,
        lambda x, j: (
            f"tp*pp*dp*cp = {x.tp}*{x.pp}*{x.dp}*{x.cp} = {x.num_devices} must equal the devices, {j.num_devices}"
        ),
    ),
    LayoutRule(
        "heads", lambda a, j: j.model.heads % a.tp == 0, lambda x, j: f"tp {x.tp} must divide heads {j.model.heads}"
    ),
    # Megatron-Core shards KV heads (num_query_groups % tp == 0); NeuronX Distributed (training, e.g. tp 32
    # for 8 KV heads), vLLM and TensorRT-LLM replicate them when tp is a multiple of kv_heads. Both are allowed.
    LayoutRule(
        "kv_heads",
        lambda a, j: (j.model.kv_heads % a.tp == 0) | (a.tp % j.model.kv_heads == 0),
        lambda x, j: (
            f"tp {x.tp} must divide kv_heads {j.model.kv_heads} (each rank holds its share) or be a multiple of it "
            f"(each KV head replicated on tp/kv_heads ranks)"
        ),
    ),
    LayoutRule(
        "layers",
        # Uneven stages may also give the embedding and the loss a pipeline chunk each, as Megatron-Core's
        # account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split do (Megatron-Bridge's
        # Llama 3.1 405B on GB200: 126 layers over pp 16 x vp 8 = 128 chunks).
        lambda a, j: (
            (j.model.layers % (a.pp * a.vp) == 0)
            | (a.uneven_stages & (j.model.layers + PIPELINE_END_CHUNKS >= a.pp * a.vp))
            | (_stated(a, "last_stage_layers") > 0)  # a stated split is uneven by design (its own rule checks it)
        ),
        lambda x, j: (
            f"layers {j.model.layers} must divide by pp*vp = {x.pp * x.vp}"
            + (
                " (or allow uneven stages, uneven_stages (--uneven-stages), with at most layers + "
                f"{PIPELINE_END_CHUNKS} chunks)"
                if j.uneven_stages_allowed
                else ""
            )
        ),
    ),
    LayoutRule(
        "last_stage_layers",
        # Megatron-Core's account_for_embedding_in_pipeline_split may leave the first chunk the embedding alone.
        lambda a, j: (
            (_stated(a, "last_stage_layers") == 0)
            | ((a.pp > 1) & (_stated(a, "last_stage_layers") <= j.model.layers - (a.pp - 1)))
        ),
        lambda x, j: (
            f"last_stage_layers {x.last_stage_layers} needs pipeline parallelism (pp > 1) and must leave each of the "
            f"other pp - 1 = {x.pp - 1} ranks a layer of the {j.model.layers}"
        ),
    ),
    LayoutRule(
        "offload_layers",
        # as Megatron-Core's TransformerConfig: no CPU offloading with pipelining or recompute, of fewer layers than all
        lambda a, j: (_stated(a, "offload_layers") == 0) | _offload_allowed(a, j.model.layers),
        lambda x, j: (
            f"offload_layers {x.offload_layers} needs pp 1 and recompute none (Megatron-Core offloads activations "
            f"without pipelining or recompute) and fewer layers than the model's {j.model.layers}"
        ),
    ),
    LayoutRule(
        "batch",
        lambda a, j: j.global_batch % (a.dp * a.micro_batch) == 0,
        lambda x, j: f"global batch {j.global_batch} must divide by dp*micro_batch = {x.dp}*{x.micro_batch}",
    ),
    LayoutRule(
        "cp", lambda a, j: j.seq_len % a.cp == 0, lambda x, j: f"cp {x.cp} must divide the sequence length {j.seq_len}"
    ),
    LayoutRule(
        "vp", lambda a, j: (a.vp == 1) | (a.pp > 1), lambda x, j: f"vp {x.vp} needs pipeline parallelism (pp > 1)"
    ),
    LayoutRule(
        "sp", lambda a, j: (a.sequence_parallel == 0) | (a.tp > 1), lambda x, j: "sequence_parallel needs tp > 1"
    ),
    LayoutRule(
        "sp_seq",
        lambda a, j: (a.sequence_parallel == 0) | (j.seq_len % (a.cp * a.tp) == 0),
        lambda x, j: (
            f"sequence parallelism splits each sequence over the tp {x.tp} ranks: the sequence length {j.seq_len}"
            + (f" over cp {x.cp}" if x.cp > 1 else "")
            + f" must divide by tp*cp = {x.tp * x.cp} (or turn sequence parallelism off)"
        ),
    ),
    LayoutRule(
        "ep_moe",
        lambda a, j: (a.ep == 1) | (j.model.moe is not None),
        lambda x, j: f"ep {x.ep} needs a mixture-of-experts model",
    ),
    LayoutRule(
        "ep_ranks",
        lambda a, j: (a.tp * a.cp * a.dp) % a.ep == 0,
        lambda x, j: f"ep {x.ep} must divide the ranks the experts fold over, tp*cp*dp = {x.tp * x.cp * x.dp}",
    ),
    LayoutRule(
        "etp",
        lambda a, j: (
            (_stated_etp(a) == 0)
            | ((j.model.moe is not None) & ((a.tp * a.cp * a.dp) % (a.ep * np.maximum(_stated_etp(a), 1)) == 0))
        ),
        lambda x, j: (
            f"etp {x.etp} needs a mixture-of-experts model"
            if j.model.moe is None
            else f"ep*etp = {x.ep}*{x.etp} must divide the ranks the experts fold over, tp*cp*dp = {x.tp * x.cp * x.dp}"
        ),
    ),
    LayoutRule(
        "ep_experts",
        lambda a, j: _moe_experts(j) % a.ep == 0,
        lambda x, j: f"ep {x.ep} must divide experts {_moe_experts(j)}",
    ),
    LayoutRule(
        "recompute_modules",
        lambda a, j: modules_allowed(a, j.model),
        lambda x, j: modules_message(x, j.model),
    ),
    LayoutRule(
        "interleave",
        lambda a, j: (a.vp == 1) | ((j.global_batch // (a.dp * a.micro_batch)) % a.pp == 0),
        lambda x, j: (
            f"interleaving (vp {x.vp}) needs the micro-batches, {x.num_micro_batches(j.global_batch)}, "
            f"to be a multiple of pp {x.pp}"
        ),
    ),
)


# The field each rule names in its error (a layout field where one is at fault, else the job's)
RULE_FIELDS = {
    "devices": "dp",
    "heads": "tp",
    "kv_heads": "tp",
    "layers": "pp",
    "batch": "global_batch",
    "cp": "cp",
    "vp": "vp",
    "sp": "sequence_parallel",
    "sp_seq": "seq_len",
    "ep_moe": "ep",
    "ep_ranks": "ep",
    "etp": "etp",
    "ep_experts": "ep",
    "interleave": "vp",
    "offload_layers": "offload_layers",
    "recompute_modules": "recompute_modules",
}


def raise_first_broken(
    layout: Layout, inputs: RuleInputs, rules: Sequence[LayoutRule], where: Callable[[], str]
) -> None:
    """Raise ``ClusterSimError`` (``where(): the rule's message``, ``where`` called only then) naming the first of
    ``rules`` that ``layout`` breaks, its field and value; nothing where it keeps them all."""
    for rule in rules:
        if not bool(rule.holds(layout, inputs)):
            field = RULE_FIELDS.get(rule.name, rule.name)
            value = getattr(layout, field, None)
            if isinstance(value, tuple):  # the stated recompute modules: their names
                value = ",".join(getattr(v, "value", str(v)) for v in value)
            raise ClusterSimError(f"{where()}: {rule.message(layout, inputs)}", field=field, value=value)


def layout_mask(layouts: LayoutArrays, inputs: RuleInputs) -> BoolArray:
    """Which layouts keep every rule of ``LAYOUT_RULES``."""
    mask = np.ones(len(layouts), dtype=bool)
    for rule in LAYOUT_RULES:
        mask &= np.asarray(rule.holds(layouts, inputs), dtype=bool)
    return mask
