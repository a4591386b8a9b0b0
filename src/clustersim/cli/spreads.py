"""The ``Spread`` a command's intervals come from: the accelerator of the instance a job runs on, its
framework and its devices, looked up in ``clustersim.intervals`` (imports happen inside the functions,
so loading a command stays light)."""

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clustersim.intervals import Spread
    from clustersim.present.serving import ServingSpreads
    from clustersim.serving.estimate import ServingEstimate
    from clustersim.training.estimate import Estimate


def spread_on(
    kind: str,
    *,
    instance: str,
    framework: str | None,
    devices: int,
    level: float,
    catalog: Sequence[str | Path] = (),
    layout: Sequence[str] = (),
    field: str = "",
) -> "Spread | None":
    """The spread of a ``kind`` job of ``framework`` on ``devices`` devices of ``instance`` (a training
    layout with the features ``layout``; ``field``: a serving latency field, sized by its own residuals)."""
    from clustersim.catalog.registry import load_catalog
    from clustersim.intervals import spread_for

    loaded = load_catalog(catalog, use_env=False)
    accelerator = loaded.accelerator(loaded.instance(instance).accelerator)
    return spread_for(
        kind,
        accelerator=accelerator.id,
        family=accelerator.family,
        framework=framework,
        devices=devices,
        level=level,
        layout=layout,
        field=field,
    )


def training_spread(
    estimate: "Estimate", instance: str, level: float, catalog: Sequence[str | Path] = (), kind: str = "training"
) -> "Spread | None":
    """The spread of a training estimate's step on ``instance``, widened by its layout's features; ``kind`` "memory":
    of its memory per device (published peak memory's residuals)."""
    from clustersim.intervals.layout import job_features

    return spread_on(
        kind,
        instance=instance,
        framework=estimate.framework or None,
        devices=estimate.num_devices,
        level=level,
        catalog=catalog,
        layout=job_features(estimate.layout, estimate.job),
    )


def memory_spread(
    estimate: "Estimate", instance: str, level: float, catalog: Sequence[str | Path] = ()
) -> "Spread | None":
    """The spread of a training estimate's memory per device on ``instance`` (published peak memory's residuals)."""
    return training_spread(estimate, instance, level, catalog, kind="memory")


def serving_spread(
    estimate: "ServingEstimate",
    instance: str,
    level: float,
    catalog: Sequence[str | Path] = (),
    field: str = "",
    *,
    experts: bool,
) -> "Spread | None":
    """The spread of a serving estimate's throughput on ``instance`` (its engine's framework), or of its
    latency ``field`` (``ttft_s``, ``tpot_s``); ``experts``: of a MoE model."""
    from clustersim.intervals.layout import serving_features

    return spread_on(
        "inference",
        instance=instance,
        framework=_framework_of(estimate.engine),
        devices=estimate.tp * estimate.pp * estimate.attention_dp * estimate.dp,
        level=level,
        catalog=catalog,
        layout=serving_features(estimate.attention_dp, experts=experts),
        field=field,
    )


def _framework_of(engine: str) -> str:
    """The framework of the engine profile ``engine`` (its own name where the profile is no longer in force)."""
    from clustersim.errors import ClusterSimError
    from clustersim.serving.engines import engine_profile

    try:
        return engine_profile(engine).framework
    except ClusterSimError:  # a profile of the user's own, no longer in force
        return engine


def simulation_spreads(
    engine: str, instance: str, devices: int, level: float, catalog: Sequence[str | Path] = (), *, experts: bool
) -> "dict[str, Spread | None]":
    """The spreads of a simulated run's figures on ``devices`` devices of ``instance``: its output rate's
    (``output_tokens_per_s``) and each latency mean's and percentile's (``MEASURED_LATENCY_FIELDS``), each sized by
    that figure's own left-out residuals; ``experts``: of a MoE model."""
    from clustersim.intervals.layout import serving_features
    from clustersim.intervals.residuals import MEASURED_LATENCY_FIELDS

    framework, layout = _framework_of(engine), serving_features(1, experts=experts)

    def of(field: str) -> "Spread | None":
        return spread_on("inference", instance=instance, framework=framework, devices=devices, level=level,
                         catalog=catalog, layout=layout, field=field)  # fmt: skip

    return {"output_tokens_per_s": of("")} | {name: of(name) for name in MEASURED_LATENCY_FIELDS}


def serving_spreads(
    estimate: "ServingEstimate", instance: str, level: float, catalog: Sequence[str | Path] = (), *, experts: bool
) -> "ServingSpreads | None":
    """The spreads of a serving estimate's throughput, TTFT and TPOT (``clustersim.present.serving``); ``experts``:
    of a MoE model."""
    from clustersim.present.serving import DURATIONS, ServingSpreads

    throughput = serving_spread(estimate, instance, level, catalog, experts=experts)
    if throughput is None:
        return None
    latency = {name: serving_spread(estimate, instance, level, catalog, name, experts=experts) for name in DURATIONS}
    return ServingSpreads(throughput, latency)
