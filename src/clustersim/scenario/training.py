"""A training scenario from a command line's inputs, and the estimate it gives.

``training_scenario`` gathers the inputs (the user's files from the environment included, as
absolute paths) so that a saved scenario replays the same run anywhere; ``run_training`` runs one,
reading no environment variable, and returns the scenario as run: the layout filled in (chosen, or
with ``dp`` filling the devices) and the sequence length resolved. A layout that is given and does not
fit in device memory is refused, as a chosen one is: the run's time and cost would mean nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from clustersim.catalog import registry
from clustersim.catalog.registry import Catalog, load_catalog
from clustersim.catalog.tomlfiles import user_paths
from clustersim.choices import CudaGraphs
from clustersim.compute import efficiency as efficiencies
from clustersim.compute import software as software_profiles
from clustersim.compute.bf16_layers import check_bf16_layers
from clustersim.compute.efficiency import FamilyEfficiency, efficiency_for, efficiency_table
from clustersim.compute.operation_formats import check_operation_formats
from clustersim.compute.software import SoftwareProfile
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, Recompute
from clustersim.intervals import DEFAULT_LEVEL
from clustersim.network.cost import ANALYTIC
from clustersim.plan.search import choose_layout, chosen_note
from clustersim.plan.space import SearchSpace
from clustersim.scenario.resilience import with_checkpoints
from clustersim.scenario.schema import (
    CheckpointSpec,
    LayoutSearchSpec,
    LayoutSpec,
    SystemSpec,
    TrainingJobSpec,
    TrainingOptions,
    TrainingScenario,
    looks_like_path,
)
from clustersim.system import System, system_for_instance
from clustersim.training.contention import Contention, FabricPlacement, contention_factors
from clustersim.training.estimate import Estimate, estimate_training
from clustersim.training.host_launches import graphs_note
from clustersim.training.job import TrainingJob, default_global_batch
from clustersim.workload import zoo
from clustersim.workload.transformer import Transformer


def user_files(env_var: str, given: Sequence[str | Path]) -> tuple[Path, ...]:
    """The files a run reads: those named in ``env_var``, then ``given``, as absolute paths."""
    return tuple(Path(p).expanduser().resolve() for p in user_paths(env_var, given, use_env=True))


def model_spec(model: str) -> str:
    """A zoo id as is; a model file as its absolute path."""
    if "\0" in model:
        rule = "no model id or file name holds a NUL byte"
        raise ClusterSimError(f"model: {model!r} is not a model ({rule})", field="model", value=model)
    return str(Path(model).expanduser().resolve()) if looks_like_path(model) else model


LayoutChoice = LayoutSpec | LayoutSearchSpec | Literal["choose"]
_GIB = 2**30


def training_scenario(
    *,
    model: str,
    system: SystemSpec,
    layout: LayoutChoice,
    job: TrainingJobSpec,
    efficiency: Sequence[Path] = (),
    catalog: Sequence[Path] = (),
    models: Sequence[Path] = (),
    framework: str | None = None,
    software: Sequence[Path] = (),
    checkpoint: CheckpointSpec | None = None,
    torch_compile: bool | None = None,
    cuda_graphs: CudaGraphs | None = None,
) -> TrainingScenario:
    """The scenario of a command line's inputs; the files in ``CLUSTERSIM_EFFICIENCY``,
    ``CLUSTERSIM_CATALOG`` and ``CLUSTERSIM_MODELS`` come first in its options, as a run reads them."""
    options = TrainingOptions(
        efficiency=user_files(efficiencies.ENV_VAR, efficiency),
        software=user_files(software_profiles.ENV_VAR, software),
        catalog=user_files(registry.ENV_VAR, catalog),
        models=user_files(zoo.ENV_VAR, models),
    )
    return TrainingScenario(
        model=model_spec(model), system=system, layout=layout, job=job, framework=framework, options=options,
        checkpoint=checkpoint, torch_compile=torch_compile, cuda_graphs=cuda_graphs,
    )  # fmt: skip


@dataclass(frozen=True)
class TrainingRun:
    """A scenario's estimate (and the same job on a second system, when asked)."""

    scenario: TrainingScenario  # as run: the layout and the sequence length filled in; save this to replay
    model: Transformer
    estimate: Estimate
    layout_chosen: bool
    compared: Estimate | None = None
    contention: Contention | None = None  # ``network="sim"``: what the job's place on the fabric costs the step


def run_system(run: TrainingRun) -> tuple[Catalog, System, SoftwareProfile, FamilyEfficiency]:
    """The catalog, system, software profile and hardware fractions ``run``'s first system was priced with,
    read from the scenario's own files as ``run_training`` read them."""
    scenario, options = run.scenario, run.scenario.options
    catalog = load_catalog(options.catalog, use_env=False)
    where = scenario.system
    system = system_for_instance(catalog, where.instance, where.nodes, devices_per_node=where.devices_per_node)
    software = software_profiles.software_for(
        scenario.framework,
        system.accelerator.family,
        software_profiles.software_profiles(options.software, use_env=False),
        accelerator=system.accelerator.id,
    )
    software = graphed_software(compiled_software(software, scenario.torch_compile), scenario.cuda_graphs)
    software = recipe_software(software, run.model, scenario.job, system)
    efficiency = efficiency_for(system.accelerator, efficiency_table(options.efficiency, use_env=False))
    return catalog, system, software, efficiency


def compiled_software(
    software: SoftwareProfile, torch_compile: bool | None, profiles: dict[str, SoftwareProfile] | None = None
) -> SoftwareProfile:
    """``software`` as a run with ``torch_compile`` prices it: true fuses a PyTorch eager stack's element-wise
    ops (``eager_elementwise`` off) and its loss where the framework compiles that too
    (``compiled_loss_bytes_per_logit``), false keeps its eager kernels, none its default; a profile that prices its
    own fused kernels (not eager by default) is refused for either value (``profiles``: named in the message)."""
    if torch_compile is None:
        return software
    if not software.eager_elementwise:
        flag = "--torch-compile" if torch_compile else "--no-torch-compile"
        eager = sorted(name for name, p in (profiles or {}).items() if p.eager_elementwise) or ["torchtitan"]
        raise ClusterSimError(
            f"torch_compile ({flag}): {software.name}'s profile prices its own fused kernels; torch.compile does not "
            f"change it (valid only with a PyTorch eager framework: {', '.join(eager)})",
            field="torch_compile",
            value=torch_compile,
        )
    if not torch_compile:
        return software
    compiled: dict[str, object] = {"eager_elementwise": False}
    if software.compiled_loss_bytes_per_logit is not None:  # the loss compiled with the model (torchtitan since 2025)
        compiled["loss_bytes_per_logit"] = software.compiled_loss_bytes_per_logit
    return software.model_copy(update=compiled)


def recipe_software(
    software: SoftwareProfile, model: Transformer, job: TrainingJobSpec, system: System
) -> SoftwareProfile:
    """``software`` with the job's BF16 layers and wider operations (``TrainingJobSpec.bf16_layers``,
    ``operation_formats``), refused where the job cannot have them (``clustersim.compute.bf16_layers``,
    ``clustersim.compute.operation_formats``)."""
    given: dict[str, object] = {}
    if job.bf16_layers:
        check_bf16_layers(model, job.bf16_layers, job.precision, field="bf16_layers")
        given["bf16_layers"] = job.bf16_layers
    if job.operation_formats:
        check_operation_formats(model, job.operation_formats, job.precision, system.accelerator)
        given["operation_formats"] = dict(job.operation_formats)
    return software.model_copy(update=given) if given else software


def graphed_software(software: SoftwareProfile, cuda_graphs: CudaGraphs | None) -> SoftwareProfile:
    """``software`` with the run's CUDA graph capture, where the scenario states one."""
    return software if cuda_graphs is None else software.model_copy(update={"cuda_graphs": cuda_graphs})


def compile_note(software: SoftwareProfile, torch_compile: bool | None) -> str | None:
    """How the run's element-wise ops were priced, for a framework where torch.compile changes them."""
    if torch_compile is None and not software.eager_elementwise:
        return None  # a profile with its own fused kernels
    if torch_compile:
        return f"{software.name} priced compiled (torch.compile): its element-wise ops fused, as a compiled run's"
    said = "--no-torch-compile" if torch_compile is False else "its default; --torch-compile prices a compiled run"
    return f"{software.name} priced eager ({said}): element-wise ops one PyTorch kernel each"


# The layout settings of a MoE layer's token exchange: (field, option, what a dense model lacks).
_EXPERT_OPTIONS = (
    ("ep_overlap", "--ep-overlap/--no-ep-overlap", "there is no expert all-to-all to overlap"),
    ("ep_dispatcher", "--ep-dispatcher", "there are no tokens to dispatch"),
)


def layout_for(spec: LayoutSpec, system: System) -> Layout:
    """The layout ``spec`` gives on ``system``: ``dp`` fills the devices when omitted, SP follows tp > 1."""
    t, p, c = spec.tp, spec.pp, spec.cp
    dp = spec.dp
    if dp is None:
        if system.num_devices % (t * p * c):
            raise ClusterSimError(
                f"tp*pp*cp = {t}*{p}*{c} = {t * p * c} does not divide the {system.num_devices} devices of "
                f"{system.name}",
                field="tp",
                value=t,
            )
        dp = system.num_devices // (t * p * c)
    fields = spec.model_dump()
    fields |= {"dp": dp, "sequence_parallel": t > 1 if spec.sequence_parallel is None else spec.sequence_parallel}
    return Layout(**fields)


def search_space(spec: LayoutSearchSpec) -> SearchSpace:
    """The planner's space with the values ``spec`` holds fixed as the only ones searched."""
    updates: dict[str, Any] = {
        name: (getattr(spec, name),)
        for name in ("tp", "pp", "vp", "cp", "ep", "micro_batch", "zero", "etp")
        if getattr(spec, name) is not None
    }
    if spec.recompute is not None:
        updates["recompute"] = (spec.recompute.value,)
    if spec.recompute_modules is not None:  # naming modules asks for selective recompute
        updates["recompute_modules"] = spec.recompute_modules
        updates.setdefault("recompute", ("selective",))
    if spec.sequence_parallel is not None:
        updates["sp"] = (spec.sequence_parallel,)
    if spec.headroom is not None:
        updates["headroom"] = spec.headroom
    if spec.ep_overlap is not None:
        updates["ep_overlap"] = spec.ep_overlap
    if spec.ep_dispatcher is not None:
        updates["ep_dispatcher"] = spec.ep_dispatcher
    return replace(SearchSpace(uneven_stages=spec.uneven_stages), **updates)


def _refuse_unless_fits(estimate: Estimate, software: software_profiles.SoftwareProfile) -> None:
    if not estimate.fits:
        need = estimate.memory.required_bytes / _GIB
        deeper = max(software.zero_stages or (3,))  # the deepest sharding the framework implements
        sharding = f"ZeRO {deeper}, " if deeper > estimate.layout.zero else ""
        layout = estimate.layout
        offload = software.activation_offload and layout.pp == 1 and layout.recompute is Recompute.NONE
        more = "more " if layout.offload_layers else ""
        offloading = f"{more}offloaded layers (--offload-layers), " if offload else ""
        raise ClusterSimError(
            f"{estimate.model} with layout {layout.describe()} does not fit on {estimate.system}: it needs "
            f"{need:.1f} GiB per device, the device has {estimate.capacity_bytes / _GIB:.1f} GiB; use more devices, "
            f"a larger tp/pp, {sharding}full recompute, {offloading}a larger-memory accelerator, or omit the layout "
            f"to have the fastest one that fits chosen",
            field="layout",
        )


def _carried_ranks(catalog: registry.Catalog, first: SystemSpec, other: SystemSpec) -> int | None:
    """Ranks per instance of ``other`` that keep ``first``'s ranks per chip (its chips' cores split the same
    way); ``ClusterSimError`` when ``other``'s chips cannot split so."""
    if first.devices_per_node is None or other.devices_per_node is not None:
        return other.devices_per_node
    first_chips = int(catalog.instance(first.instance).num_accelerators.value)
    per_chip = max(first.devices_per_node // first_chips, 1)
    entry = catalog.instance(other.instance)
    accelerator = catalog.accelerator(entry.accelerator)
    cores = int(accelerator.num_cores.value) if accelerator.num_cores else 1
    if cores % per_chip:
        raise ClusterSimError(
            f"--compare {entry.id}: the first system runs {per_chip} ranks per chip (--devices-per-node "
            f"{first.devices_per_node} on {first_chips}-chip {first.instance}), which the {cores}-core "
            f"{accelerator.id} of {entry.id} cannot split; compare without --devices-per-node (one rank per chip)",
            field="--compare",
            value=other.instance,
        )
    return per_chip * int(entry.num_accelerators.value)


def run_training(
    scenario: TrainingScenario,
    *,
    compare: SystemSpec | None = None,
    network: str = "analytic",
    fabric: FabricPlacement | None = None,
) -> TrainingRun:
    """The estimate of ``scenario``; with ``compare``, also the same job on that system (its layout
    chosen again, or the same degrees with ``dp`` filling its devices; ranks per chip as in the
    scenario). A given layout that does not fit in device memory is refused. ``network`` names the
    collective cost model of the estimate: ``analytic``, or ``sim``: the step's groups simulated on the
    cluster's fabric where ``fabric`` places the job (``training.contention``; default packed, the
    instance's routing), what that place costs against a packed, sprayed, non-blocking one scaling the
    analytic times; a layout is still chosen with the
    analytic model."""
    if network not in ("analytic", "sim"):
        raise ClusterSimError(f"network: {network!r} is not analytic or sim", field="network", value=network)
    if fabric is not None and network != "sim":
        raise ClusterSimError(
            "--placement, --routing, --oversubscription, --fabric-seed(s) and --fabric-hosts place the job on the "
            "simulated fabric: "
            "they need --network sim",
            field="network",
            value=network,
        )
    where_on_fabric = fabric or FabricPlacement()
    cost = ANALYTIC
    contentions: list[Contention] = []
    compiled: list[bool | None] = []  # each system's torch.compile setting as priced (none: not a setting there)
    options = scenario.options
    transformer = zoo.load_model(scenario.model, extra_dirs=options.models, use_env=False)
    catalog = load_catalog(options.catalog, use_env=False)
    table = efficiency_table(options.efficiency, use_env=False)
    profiles = software_profiles.software_profiles(options.software, use_env=False)
    spec = scenario.job
    transformer.check_unquantized("training")
    seq_len = spec.seq_len if spec.seq_len is not None else transformer.seq_len
    where = scenario.system  # the default batch scales with the first system's devices
    first = system_for_instance(catalog, where.instance, where.nodes, devices_per_node=where.devices_per_node)
    job = TrainingJob(
        global_batch=spec.global_batch
        if spec.global_batch is not None
        else default_global_batch(seq_len, first.num_devices),
        seq_len=seq_len,
        precision=spec.precision,
        tokens=spec.tokens,
    )
    beyond = transformer.check_context(job.seq_len, "seq_len (--seq)", beyond_context=spec.beyond_context)
    context_notes = () if beyond is None else (beyond,)
    chosen = not isinstance(scenario.layout, LayoutSpec)
    safe = isinstance(scenario.layout, LayoutSearchSpec) and bool(scenario.layout.safe)
    for name, flag, what in _EXPERT_OPTIONS:  # settings of the expert all-to-all: refused without experts
        value = None if isinstance(scenario.layout, str) else getattr(scenario.layout, name)
        if value is not None and transformer.moe is None:
            raise ClusterSimError(
                f"{name} ({flag}): {transformer.name} has no experts, so {what} (valid only for a MoE model)",
                field=name,
                value=value if isinstance(value, bool) else str(value),
            )
    micro_batch = None if isinstance(scenario.layout, str) else scenario.layout.micro_batch
    if micro_batch is not None and micro_batch > job.global_batch:
        raise ClusterSimError(
            f"micro-batch {micro_batch} is larger than the global batch, {job.global_batch} sequences: a micro-batch "
            f"is a slice of one data-parallel rank's share of the global batch",
            field="micro_batch",
            value=micro_batch,
        )

    def run_on(where: SystemSpec, layout: LayoutChoice) -> Estimate:
        system = system_for_instance(catalog, where.instance, where.nodes, devices_per_node=where.devices_per_node)
        fractions = efficiency_for(system.accelerator, table)
        software = software_profiles.software_for(
            scenario.framework, system.accelerator.family, profiles, accelerator=system.accelerator.id
        )
        eager_default = False if software.eager_elementwise else None
        compiled.append(eager_default if scenario.torch_compile is None else scenario.torch_compile)
        software = graphed_software(compiled_software(software, scenario.torch_compile, profiles), scenario.cuda_graphs)
        software = recipe_software(software, transformer, scenario.job, system)
        if isinstance(layout, LayoutSpec):
            given = layout_for(layout, system)
        else:
            space = search_space(layout) if isinstance(layout, LayoutSearchSpec) else None
            if safe:  # the layout must fit at the upper end of its memory's interval too
                space = replace(space or SearchSpace(), memory_level=DEFAULT_LEVEL)
            given = choose_layout(
                transformer, system, job, space=space, efficiency=fractions, software=software, safe=safe
            )
        said = compile_note(software, scenario.torch_compile)
        graphed = graphs_note(software, transformer, system.accelerator.id)
        chose = (chosen_note(transformer, given, safe),) if chosen else ()
        notes = context_notes + chose + tuple(note for note in (said, graphed) if note)
        estimate = estimate_training(
            transformer, system, given, job, offer=spec.price, efficiency=fractions, software=software, notes=notes,
            cost=cost,
        )  # fmt: skip
        if network == "sim":
            contended, drawn, routing, oversubscription = contention_factors(
                transformer, system, given, job, catalog, where_on_fabric, software=software, efficiency=fractions
            )
            analytic_step_s = estimate.step_s
            estimate = estimate_training(
                transformer, system, given, job, offer=spec.price, efficiency=fractions, software=software,
                notes=notes, cost=contended,
            )  # fmt: skip
            found = Contention(
                where_on_fabric.placement, routing, oversubscription, where_on_fabric.seed, drawn.factors,
                analytic_step_s, estimate.step_s, drawn.spread, drawn.seeds, drawn.loaded,
            )  # fmt: skip
            contentions.append(found)
            estimate = replace(estimate, notes=(*estimate.notes, found.describe()))
        _refuse_unless_fits(estimate, software)
        if scenario.checkpoint is None:
            return estimate
        return with_checkpoints(
            estimate, scenario.checkpoint, model=transformer, system=system, catalog=catalog,
            framework=software.name,
        )  # fmt: skip

    estimate = run_on(scenario.system, scenario.layout)
    compared = None
    if compare is not None:
        compare = compare.model_copy(update={"devices_per_node": _carried_ranks(catalog, scenario.system, compare)})
        layout = scenario.layout
        other = layout.model_copy(update={"dp": None}) if isinstance(layout, LayoutSpec) else layout
        compared = run_on(compare, other)
    ran = scenario.model_copy(
        update={
            "layout": LayoutSpec(**estimate.layout.model_dump()),
            "job": spec.model_copy(update={"seq_len": job.seq_len, "global_batch": job.global_batch}),
            "framework": scenario.framework or estimate.framework,  # the family's default, named
            "torch_compile": compiled[0],  # torchtitan's default (eager), named
        }
    )
    return TrainingRun(
        scenario=ran, model=transformer, estimate=estimate, layout_chosen=chosen, compared=compared,
        contention=contentions[0] if contentions else None,
    )  # fmt: skip
