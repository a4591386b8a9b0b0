"""``clustersim fabric step``: one training step's communication on the cluster's fat-tree, group by
group as the estimator lays the job out, simulated and set against the analytic model.

The job and layout options are ``train``'s (parsed by its ``_scenario_of_options``; with --tp and
--pp the layout is given, otherwise chosen as ``train`` chooses it; --uneven-stages, --last-stage-layers, --ep-overlap,
--torch-compile, --headroom and --beyond-context as there, and its --framework, --software and --efficiency
files: the layout, its stages' layers and the profile it is chosen and priced with are ``train``'s); the fabric
options are ``fabric simulate``'s."""

from typing import Annotated

import typer

from clustersim.cli.calibrate import CalibrationOption, calibration_overlay
from clustersim.cli.common import (
    CatalogOption,
    JsonOption,
    ModelsOption,
    emit_json,
    given_options,
    print_all,
    user_errors,
)
from clustersim.cli.fabric_options import (
    FailLeafOpt,
    FailOpt,
    FailSwitchOpt,
    HostsOpt,
    IdealOpt,
    InstanceOpt,
    NodesOpt,
    OversubOpt,
    PlacementOpt,
    PlotOpt,
    RadixOpt,
    RoutingOpt,
    SeedOpt,
    StepsOpt,
    calibration_in_force,
    calibration_line,
    flow_progress,
    links_line,
    parse_routing,
    refuse_ideal_calibration,
    write_plot,
)
from clustersim.cli.job_options import (
    BeyondContextOpt,
    CpOpt,
    DevicesPerNodeOpt,
    EfficiencyOpt,
    EpDispatcherOpt,
    EpOpt,
    EpOverlapOpt,
    EtpOpt,
    FrameworkOpt,
    HeadroomOpt,
    LastStageLayersOpt,
    MicroBatchOpt,
    OffloadLayersOpt,
    PpOpt,
    PrecisionOpt,
    RecomputeOpt,
    SeqOpt,
    SoftwareOpt,
    SpOpt,
    TorchCompileOpt,
    TpOpt,
    TrainGlobalBatchOpt,
    UnevenStagesOpt,
    VpOpt,
    ZeroOpt,
)
from clustersim.cli.progress import MaxEventsOpt
from clustersim.cli.train_inputs import BackgroundOpt


def step_command(
    ctx: typer.Context,
    model: Annotated[
        str, typer.Argument(metavar="MODEL", help="Zoo id (e.g. llama3-70b), a model TOML or config.json.")
    ],
    instance: InstanceOpt = "p5.48xlarge",
    nodes: NodesOpt = 16,
    devices_per_node: DevicesPerNodeOpt = None,
    tp: TpOpt = None,
    pp: PpOpt = None,
    vp: VpOpt = None,
    cp: CpOpt = 1,
    ep: EpOpt = 1,
    etp: EtpOpt = None,
    micro_batch: MicroBatchOpt = None,
    zero: ZeroOpt = None,
    sp: SpOpt = None,
    recompute: RecomputeOpt = None,
    uneven: UnevenStagesOpt = None,
    last_stage_layers: LastStageLayersOpt = None,
    offload_layers: OffloadLayersOpt = None,
    ep_overlap: EpOverlapOpt = None,
    ep_dispatcher: EpDispatcherOpt = None,
    torch_compile: TorchCompileOpt = None,
    headroom: HeadroomOpt = None,
    global_batch: TrainGlobalBatchOpt = None,
    seq: SeqOpt = None,
    beyond_context: BeyondContextOpt = False,
    precision: PrecisionOpt = "bf16",
    framework: FrameworkOpt = None,
    efficiency: EfficiencyOpt = None,
    software: SoftwareOpt = None,
    routing: RoutingOpt = "spray",
    oversubscription: OversubOpt = None,
    placement: PlacementOpt = "packed",
    fail_links: FailOpt = 0,
    fail_switches: FailSwitchOpt = 0,
    fail_leaves: FailLeafOpt = 0,
    seed: SeedOpt = 0,
    radix: RadixOpt = 64,
    fabric_hosts: HostsOpt = None,
    max_steps: StepsOpt = 4,
    max_events: MaxEventsOpt = None,
    ideal: IdealOpt = False,
    plot: PlotOpt = None,
    background: BackgroundOpt = None,
    calibration: CalibrationOption = None,
    models: ModelsOption = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Simulate one training step's communication (TP, CP, EP, PP and DP groups as the estimator places
    them) on the cluster's fat-tree: each kind alone and all at once, against the analytic model (on the
    calibrated links, priced with the analytic latency and ramp; --ideal: the datasheet links)."""
    from clustersim.cli.train import LAYOUT_OPTIONS, _scenario_of_options
    from clustersim.network.flowsim.cluster import (
        fail_job_links,
        fail_job_switches,
        fat_tree_for_instance,
        parse_placement,
        place,
    )
    from clustersim.network.flowsim.engine import Flows
    from clustersim.network.flowsim.failover import fail_job_leaves
    from clustersim.network.flowsim.routing import Routing
    from clustersim.network.flowsim.work import estimate_flows
    from clustersim.network.work import check_work
    from clustersim.scenario.training import run_system, run_training
    from clustersim.training.background import other_hosts, parse_background
    from clustersim.training.fabric_step import step_collectives, step_on_fabric
    from clustersim.training.job import TrainingJob

    with user_errors(), calibration_overlay(calibration):
        refuse_ideal_calibration(ideal, calibration)
        calibrated = calibration_in_force()
        route = Routing(parse_routing(routing))
        where = parse_placement(placement)
        load = None if background is None else parse_background(background)
        spec = _scenario_of_options(
            model=model, instance=instance, nodes=nodes, devices_per_node=devices_per_node, tp=tp, pp=pp, vp=vp,
            cp=cp, ep=ep, etp=etp, micro_batch=micro_batch, zero=zero, sp=sp, recompute=recompute, uneven=uneven,
            ep_overlap=ep_overlap, ep_dispatcher=ep_dispatcher, headroom=headroom, beyond_context=beyond_context,
            tokens="1T", last_stage_layers=last_stage_layers, offload_layers=offload_layers,
            global_batch=global_batch, seq=seq, precision=precision, offer="on_demand", models=models or [],
            efficiency=efficiency or [], catalog=catalog or [], framework=framework, software=software or [],
            given=set(given_options(ctx, LAYOUT_OPTIONS)), torch_compile=torch_compile,
        )  # fmt: skip
        spec = spec.model_copy(update={"job": spec.job.model_copy(update={"tokens": None})})  # one step
        ran = run_training(spec)  # the layout as train gives or chooses it (and refuses it if it does not fit)
        cat, system, profile, fractions = run_system(ran)  # the files read as train read them
        job_spec = ran.scenario.job
        job = TrainingJob(
            global_batch=int(job_spec.global_batch or 0),
            seq_len=int(job_spec.seq_len or 0),
            precision=job_spec.precision,
        )
        layout = ran.estimate.layout
        collectives = step_collectives(ran.model, system, layout, job, software=profile, efficiency=fractions)
        tree = fat_tree_for_instance(
            cat, instance, nodes, fabric_hosts=fabric_hosts, radix=radix, oversubscription=oversubscription,
            topology=system.topology,
        )  # fmt: skip
        hosts = place(tree, nodes, where, seed)
        tree = fail_job_switches(fail_job_links(tree, hosts, fail_links, seed), hosts, fail_switches, seed)
        tree = fail_job_leaves(tree, hosts, fail_leaves, seed)
        tenants = 0 if load is None else int(other_hosts(tree, hosts).size)  # refused: no other host
        title = (
            f"{ran.model.name} ({layout.describe()}) on {nodes} x {system.instance.id if system.instance else instance}"
        )

        def refuse_past_the_bound(flows: Flows) -> None:
            what = f"one training step on {nodes:,} nodes, {flows.num_flows:,} flows (each kind alone, then all)"
            check_work(estimate_flows(flows, what=what, runs=2), max_events)

        with flow_progress(None) as progress:
            step = step_on_fabric(
                collectives, tree, hosts, layout=layout, title=title, routing=route, seed=seed, max_steps=max_steps,
                before_run=refuse_past_the_bound, progress=progress, ideal=ideal, background=load,
            )  # fmt: skip
    from clustersim.present.fabric import draw_json, draw_line, fabric_dict, seeded
    from clustersim.present.fabric_step import plot_step, step_view
    from clustersim.present.training import note_lines

    drawn = seeded(route.value, placement, fail_links + fail_switches + fail_leaves)
    if load is not None and load.active and load.pattern.value == "permutation":
        drawn.append("the background's permutation")
    loaded = None if load is None else {**load.to_dict(), "hosts": tenants}

    if plot is not None:
        with user_errors():
            write_plot(plot_step, step, plot)
    if as_json:
        extra = {"placement": placement, "seed": seed, "failed_links": fail_links, "failed_switches": fail_switches}
        extra |= {"failed_leaves": fail_leaves, "devices_per_node": system.devices_per_node}
        extra |= draw_json(drawn, [seed]) | {"calibration": calibrated, "background": loaded}
        extra["torch_compile"] = ran.scenario.torch_compile  # as train says it (none: not a setting there)
        emit_json({**step.to_dict(), "fabric": fabric_dict(tree), "layout_chosen": ran.layout_chosen, **extra})
        return
    ramp = None if ideal else "fitted"
    print_all(*step_view(step), links_line(step.links, ramp), draw_line(drawn, [seed]))
    if load is not None:
        print_all(f"background: {load.describe()}, {tenants:,} hosts, in every run above")
    if not ideal:
        print_all(calibration_line(calibrated))
    print_all(*note_lines(ran.estimate))  # how the layout was chosen and priced, as train says it
