"""``clustersim report``: one self-contained HTML page (``clustersim.present.report_html``) for a training
scenario (``--scenario``), a plan's JSON (``--plan``), a sweep store (``--from``) or the bundled validation
(``--validate``). The page embeds, under ``cli``, the JSON the matching command prints with ``--json``
(``train --scenario``, ``plan --json``, ``sweep show --json``, ``validate --json``), and draws its figures
from the same numbers. Plotly and Jinja2 are the optional extra ``report``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clustersim.cli.common import CatalogOption, user_errors
from clustersim.cli.level_option import DEFAULT_LEVEL, LevelOption
from clustersim.cli.train_inputs import (
    BackgroundOpt,
    NetworkOpt,
    SimHostsOpt,
    SimOversubOpt,
    SimPlacementOpt,
    SimRoutingOpt,
    SimSeedOpt,
    SimSeedsOpt,
    fabric_placement,
)
from clustersim.errors import ClusterSimError

if TYPE_CHECKING:
    from clustersim.present.report_html import Cell, Section
    from clustersim.training.contention import FabricPlacement

SOURCES = ("--scenario", "--plan", "--from", "--validate")


def report_command(
    output: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write (whole or not at all).")],
    scenario: Annotated[
        Path | None,
        typer.Option("--scenario", help="A training scenario file (train --save-scenario): the job's report."),
    ] = None,
    plan: Annotated[
        Path | None, typer.Option("--plan", help="The JSON of clustersim plan ... --json: its Pareto front and top.")
    ] = None,
    store: Annotated[
        Path | None, typer.Option("--from", help="A sweep store (sweep --store): its rows, time against cost.")
    ] = None,
    validate: Annotated[
        bool, typer.Option("--validate", help="The bundled validation: predicted against measured, coverage.")
    ] = False,
    network: NetworkOpt = "analytic",
    placement: SimPlacementOpt = None,
    routing: SimRoutingOpt = None,
    oversubscription: SimOversubOpt = None,
    fabric_seed: SimSeedOpt = None,
    fabric_seeds: SimSeedsOpt = None,
    fabric_hosts: SimHostsOpt = None,
    background: BackgroundOpt = None,
    level: LevelOption = DEFAULT_LEVEL,
    catalog: CatalogOption = None,
) -> None:
    """Write one self-contained HTML report (interactive figures, each with its numbers in a table and in the
    page's embedded JSON) for exactly one of --scenario, --plan, --from or --validate. With --scenario,
    --network sim (and train's fabric options, --background included) runs the job on the cluster's fabric as
    train does, and adds the fabric view: utilization by tier and the hottest links."""
    from clustersim.present.report_html import render_page, require_report_libraries, write_page

    with user_errors():
        given = [flag for flag, value in zip(SOURCES, (scenario, plan, store, validate), strict=True) if value]
        if len(given) != 1:
            raise ClusterSimError(
                f"report: give exactly one of {', '.join(SOURCES)} (got {', '.join(given) or 'none'})",
                field="report",
                value=",".join(given),
            )
        where = fabric_placement(
            placement, routing, oversubscription, fabric_seed, fabric_hosts, fabric_seeds, background, network
        )
        if scenario is None and (network != "analytic" or where is not None):
            raise ClusterSimError(
                f"--network and the fabric options place a training job on the fabric; they need --scenario, "
                f"not {given[0]}",
                field="--network",
                value=network,
            )
        require_report_libraries()
        if scenario is not None:
            kind, title, summary, sections, cli = training_report(scenario, level, catalog or [], network, where)
        elif plan is not None:
            kind, title, summary, sections, cli = plan_report(plan)
        elif store is not None:
            kind, title, summary, sections, cli = sweep_report(store)
        else:
            kind, title, summary, sections, cli = validation_report(level, catalog or [])
        written = write_page(output, render_page(kind, title, summary, sections, cli))
    typer.echo(f"wrote {written} ({written.stat().st_size / 1e6:.1f} MB, {len(sections)} sections)")


Report = tuple[str, str, "list[list[Cell]]", "list[Section]", dict[str, Any]]


def training_report(
    path: Path,
    level: float,
    catalog: list[Path],
    network: str = "analytic",
    where: FabricPlacement | None = None,
) -> Report:
    """A training scenario's report: its estimate (``train --scenario FILE [--network sim ...] --json``), the
    collectives of its step and, with ``network`` sim, the step on the fabric (``fabric``)."""
    from clustersim.cli.report_collectives import job_collectives, train_json
    from clustersim.cli.report_fabric import job_on_fabric
    from clustersim.cli.train import _replay
    from clustersim.present.report_fabric import fabric_sections
    from clustersim.present.report_training import summary_rows, training_sections
    from clustersim.scenario.training import run_training
    from clustersim.training.contention import FabricPlacement

    if catalog:
        raise ClusterSimError("--catalog: a scenario file names its own catalog files", field="--catalog")
    run = run_training(_replay(path, []), network=network, fabric=where)
    train = train_json(run, level)
    collectives = job_collectives(run, level)
    title = f"clustersim report: {run.estimate.model} on {run.estimate.system}"
    cli: dict[str, Any] = {"train": train, "collectives": collectives}
    fabric: list[Section] = []
    if network == "sim":
        cli["fabric"] = job_on_fabric(run, where or FabricPlacement())
        fabric = fabric_sections(cli["fabric"])
    return "training", title, summary_rows(train), training_sections(train, collectives, fabric), cli


def plan_report(path: Path) -> Report:
    """A plan's report from ``plan --json``'s output."""
    from clustersim.present.report_tables import plan_sections, plan_summary

    plan = _json_file(path, "--plan", ("pareto", "top", "objective", "model"))
    return "plan", f"clustersim plan: {plan['model']}", plan_summary(plan), plan_sections(plan), {"plan": plan}


def sweep_report(path: Path) -> Report:
    """A sweep store's report: its rows (``sweep show``'s columns) and, for training rows, time against cost."""
    from clustersim.present.report_tables import sweep_sections
    from clustersim.sweep.export import headline, public, records
    from clustersim.sweep.store import read_store

    meta, rows = read_store(path, "--from")
    flat = records(rows)
    inputs = list(dict.fromkeys(k for r in flat for k in r if k.startswith("inputs.")))
    columns = ["seq", "id", "status", *inputs, *headline(flat, limit=8), "error"]
    command = meta["command"]
    summary: list[list[Cell]] = [["command", command], ["points", f"{len(rows)} of {meta.get('points', len(rows))}"]]
    cli = {"sweep": {"rows": [public(row) for row in rows]}}
    return "sweep", f"clustersim sweep: {command}", summary, sweep_sections(command, flat, columns), cli


def validation_report(level: float, catalog: list[Path]) -> Report:
    """The bundled validation's report: ``validate --json`` and each case's source."""
    from clustersim.catalog.registry import load_catalog
    from clustersim.present.report_tables import validation_sections, validation_summary
    from clustersim.validation.cases import default_case_files
    from clustersim.validation.run import validate_bundled
    from clustersim.validation.unread import unread_by_file

    result = validate_bundled(load_catalog(catalog), level=level)
    data = json.loads(json.dumps(result.to_json() | {"unread_fields": unread_by_file(default_case_files())}))
    sources = {case.id: case.source for case in result.cases}
    title = "clustersim validation: predicted against measured"
    return "validation", title, validation_summary(data), validation_sections(data, sources), {"validate": data}


def _json_file(path: Path, flag: str, keys: tuple[str, ...]) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ClusterSimError(f"{flag}: cannot read {path}: {exc.strerror or exc}", field=flag) from None
    except ValueError as exc:
        raise ClusterSimError(f"{flag}: {path} is not JSON ({exc})", field=flag, value=str(path)) from None
    missing = [key for key in keys if not isinstance(data, dict) or key not in data]
    if missing:
        raise ClusterSimError(
            f"{flag}: {path} lacks {', '.join(missing)} (valid: the output of clustersim plan ... --json)",
            field=flag,
            value=str(path),
        )
    return data
