"""The estimates ``clustersim serve`` prints: its scenario on one instance (and on ``--compare``'s), and why the
two differ (``clustersim.cli.serve``)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clustersim.catalog.registry import Catalog
    from clustersim.scenario.schema import ServingScenario as ServingScenarioFile
    from clustersim.serving.estimate import Request, ServingEstimate
    from clustersim.serving.serving_system import MoeExchange
    from clustersim.workload.transformer import Transformer


def serve_estimates(
    spec: ServingScenarioFile, compare: str | None
) -> tuple[Transformer, list[ServingEstimate], list[str]]:
    """The model, the estimate on the scenario's instance (and on ``compare``), and why they differ."""
    from clustersim.catalog.registry import load_catalog
    from clustersim.serving.dataset_context import dataset_context_notes
    from clustersim.serving.engine import parse_precision, serving_system_for_instance
    from clustersim.serving.estimate import Request, compare_offline
    from clustersim.serving.sim_requests import request_sampler, request_spread
    from clustersim.workload.zoo import load_model

    transformer = load_model(spec.model, extra_dirs=spec.options.models, use_env=False)
    cat = load_catalog(spec.options.catalog, use_env=False)
    wanted = spec.request
    lengths = wanted.lengths()
    stated = (wanted.input_tokens is not None, wanted.output_tokens is not None)
    drawn = request_sampler(lengths.dataset, lengths.input_tokens, lengths.output_tokens, stated=stated)
    request = Request(
        input_tokens=lengths.input_tokens,
        output_tokens=lengths.output_tokens,
        precision=parse_precision(wanted.precision, "--precision"),
        kv_precision=parse_precision(wanted.kv_cache, "--kv-cache") if wanted.kv_cache else None,
        batching=wanted.batching,
        beyond_context=wanted.beyond_context,
        **request_spread(drawn),
    )
    extra = dataset_context_notes(transformer, lengths.dataset, request)  # its longest request, refused or noted
    request.notes(transformer)  # the mean lengths beyond the context are refused here, naming the field
    load = spec.load
    tp = None if spec.system.tp == "choose" else spec.system.tp
    instances = [spec.system.instance] + ([compare] if compare else [])
    mode = (load.batch, load.rate_per_s, load.ttft_target_s, load.tpot_target_s)
    layout = (tp, spec.system.pp, spec.system.attention_dp, spec.system.moe_exchange, spec.system.nodes)
    estimates = [_run(transformer, cat, name, layout, request, mode, spec.engine) for name in instances]
    estimates = [replace(e, notes=extra + e.notes) for e in estimates]
    reasons: tuple[str, ...] = ()
    if compare and load.rate_per_s is None and load.ttft_target_s is None and load.tpot_target_s is None:
        first, second = (serving_system_for_instance(cat, e.system, tp=e.tp, pp=e.pp, dp=e.dp,
                         attention_dp=e.attention_dp, moe_exchange=e.moe_exchange, nodes=e.nodes)
                         for e in estimates)  # fmt: skip
        if (first.tp, first.pp) == (second.tp, second.pp):
            reasons = compare_offline(transformer, first, second, request, batch=load.batch, engine=spec.engine).reasons
    return transformer, estimates, list(reasons)


def _run(
    model: Transformer,
    catalog: Catalog,
    instance: str,
    layout: tuple[int | None, int, int, MoeExchange, int],
    request: Request,
    scenario: tuple[int | None, float | None, float | None, float | None],
    engine: str | None,
) -> ServingEstimate:
    """The estimate on ``instance``; ``layout`` is (tp, pp, attention dp, MoE exchange, nodes); ``scenario`` is (batch,
    rate, ttft target, tpot target); no ``tp``: the best degree (``clustersim.plan.serving``). ``engine``: checked
    against the instance's accelerator family (none: the family's default engine;
    ``clustersim.serving.engines.engine_for``)."""
    from clustersim.plan.serving import ServingScenario, best_serving_layout
    from clustersim.serving.engines import engine_for

    chip = catalog.accelerator(catalog.instance(instance).accelerator)
    engine = engine_for(engine, chip.family, accelerator=chip.id).name

    batch, rate, ttft_target, tpot_target = scenario
    wanted = ServingScenario(batch=batch, rate_per_s=rate, ttft_target_s=ttft_target, tpot_target_s=tpot_target)
    tp, pp, groups, exchange, nodes = layout
    return best_serving_layout(
        model, catalog, instance, request, tp=tp, pp=pp, scenario=wanted, engine=engine, attention_dp=groups,
        moe_exchange=exchange, nodes=nodes,
    )  # fmt: skip
