"""``clustersim sweep``: run a spec's grid of points over one command's options into a SQLite store, by a
local process pool or a Ray cluster, resumable after a kill; ``sweep show`` prints and exports a store."""

import math
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from clustersim.cli.common import JsonOption, LightGroup, emit_json, print_all, user_errors
from clustersim.errors import ClusterSimError


class SweepGroup(LightGroup):
    """``sweep SPEC`` is ``sweep run SPEC``: a first word that names no subcommand is the spec."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            return "run", self.commands["run"], args
        return super().resolve_command(ctx, args)


class Executor(StrEnum):
    """Where the points run."""

    LOCAL = "local"
    RAY = "ray"


class Format(StrEnum):
    """How ``sweep show`` writes the rows."""

    TABLE = "table"
    CSV = "csv"
    JSON = "json"
    PARQUET = "parquet"


sweep_app = typer.Typer(
    help="Sweep a command's options over a grid into a resumable SQLite store (sweep SPEC is sweep run SPEC).",
    no_args_is_help=True,
    rich_markup_mode=None,
    cls=SweepGroup,
)


@sweep_app.command("run")
def run_command(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC", help="The sweep spec, a TOML file.")],
    store: Annotated[
        Path | None, typer.Option("--store", help="SQLite file for the rows (WAL; default: in memory, not kept).")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the sweep in --store: run only the points it lacks.")
    ] = False,
    executor: Annotated[
        Executor, typer.Option("--executor", case_sensitive=False, help="local (a process pool) or ray.")
    ] = Executor.LOCAL,
    address: Annotated[
        str | None, typer.Option("--address", help="The Ray cluster to join (default: start a local one).")
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", min=1, max=4096, help="Processes (local) or CPUs of a new local Ray; default: all cores."
        ),
    ] = None,
    partition_size: Annotated[
        int | None,
        typer.Option(
            "--partition-size", min=1, max=100_000, help="Points per task and per commit (default: ~4 per worker)."
        ),
    ] = None,
    retries: Annotated[int, typer.Option("--retries", min=0, max=100, help="Tries again for a failed task.")] = 2,
    as_json: JsonOption = False,
) -> None:
    """Run every point of SPEC (one row each: its inputs and the command's --json result, or its error)."""
    from clustersim.cli.progress import progress_bar
    from clustersim.cli.sweep_point import check, run_partition
    from clustersim.processes import default_workers
    from clustersim.sweep.run import run_sweep
    from clustersim.sweep.spec import load_spec
    from clustersim.sweep.store import MEMORY, SweepStore

    with user_errors():
        if address is not None and executor is not Executor.RAY:
            raise ClusterSimError("--address: only with --executor ray", field="--address", value=address)
        if resume and store is None:
            raise ClusterSimError("--resume: needs the --store to resume", field="--resume")
        spec = load_spec(spec_path)
        check(spec)
        opened = SweepStore(store if store is not None else MEMORY)
        try:
            with progress_bar(f"sweep ({executor.value})", "points") as progress:
                summary = run_sweep(
                    spec,
                    opened,
                    run_partition,
                    executor=executor.value,
                    workers=workers or default_workers(),
                    address=address,
                    partition_size=partition_size,
                    retries=retries,
                    resume=resume,
                    progress=progress,
                )
            rows = opened.rows()
        finally:
            opened.close()
    _report(summary)
    if as_json:
        from clustersim.sweep.export import public

        emit_json({"rows": [public(row) for row in rows]})
        return
    print_all(_table(spec.command, rows, int(summary.points)))


@sweep_app.command("show")
def show_command(
    store: Annotated[Path, typer.Argument(metavar="STORE", help="A sweep store (the --store of sweep run).")],
    output_format: Annotated[
        Format | None,
        typer.Option(
            "--format", case_sensitive=False, help="table, csv, json or parquet (default: from --output, else table)."
        ),
    ] = None,
    output: Annotated[Path | None, typer.Option("--output", help="Write to this file rather than stdout.")] = None,
    columns: Annotated[
        str | None, typer.Option("--columns", help="Result columns of the table, comma-separated dotted paths.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Print a sweep store's rows (or export them: CSV, JSON, Parquet with pyarrow)."""
    import sys

    from clustersim.sweep.export import records, write_csv, write_json, write_parquet
    from clustersim.sweep.store import read_store

    with user_errors():
        kind = _format(output_format, output, as_json)
        meta, rows = read_store(store, "STORE")
        total = int(meta.get("points", len(rows)))
        if len(rows) < total:
            sys.stderr.write(f"sweep show: {len(rows):,} of {total:,} points finished (resume with --resume)\n")
        if kind is Format.PARQUET:
            if output is None:
                raise ClusterSimError("--format parquet: needs --output FILE", field="--output")
            write_parquet(records(rows), output)
            return
        if kind is Format.TABLE:
            wanted = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
            print_all(_table(meta["command"], rows, total, wanted))
            return
        stream = sys.stdout if output is None else _open(output)
        try:
            if kind is Format.CSV:
                write_csv(records(rows), stream)
            else:
                write_json(rows, stream)
        finally:
            if stream is not sys.stdout:
                stream.close()


def _format(given: Format | None, output: Path | None, as_json: bool) -> Format:
    if as_json:
        if given not in (None, Format.JSON):
            raise ClusterSimError(f"--json: conflicts with --format {given}", field="--json")
        return Format.JSON
    if given is not None:
        return given
    if output is None:
        return Format.TABLE
    by_suffix = {".csv": Format.CSV, ".json": Format.JSON, ".parquet": Format.PARQUET}
    if output.suffix.lower() not in by_suffix:
        raise ClusterSimError(
            f"--output: cannot tell the format from {str(output)!r}; give --format csv|json|parquet or a name "
            f"ending in .csv, .json or .parquet",
            field="--output",
            value=str(output),
        )
    return by_suffix[output.suffix.lower()]


def _open(path: Path) -> Any:
    try:
        return path.open("w", encoding="utf-8", newline="")
    except OSError as exc:
        raise ClusterSimError(f"--output: cannot write {path}: {exc.strerror or exc}", field="--output") from None


def _report(summary: Any) -> None:
    import sys

    rate = summary.computed / summary.elapsed_s if summary.elapsed_s > 0 else 0.0
    sys.stderr.write(
        f"sweep: {summary.points:,} points, {summary.from_store:,} from the store, {summary.computed:,} computed in "
        f"{summary.partitions:,} partitions ({summary.errors:,} refused) in {summary.elapsed_s:.1f} s "
        f"({rate:,.1f} points/s)\n"
    )


def _table(command: str, rows: list[dict[str, Any]], total: int, wanted: list[str] | None = None) -> Any:
    from rich.table import Table

    from clustersim.sweep.export import headline, records

    flat = records(rows)
    inputs = [key for key in dict.fromkeys(k for r in flat for k in r if k.startswith("inputs."))]
    varying = [key for key in inputs if len({str(r.get(key)) for r in flat}) > 1] or inputs
    results = [f"result.{c.removeprefix('result.')}" for c in wanted] if wanted else headline(flat)
    known = {key for record in flat for key in record}
    unknown = [key for key in results if key not in known]
    if unknown:
        raise ClusterSimError(
            f"--columns: {unknown[0].removeprefix('result.')!r} is not a result column (e.g. "
            f"{', '.join(k.removeprefix('result.') for k in headline(flat)[:3]) or 'none: no point succeeded'})",
            field="--columns",
            value=unknown[0].removeprefix("result."),
        )
    errors = any(r["status"] == "error" for r in flat)
    table = Table(title=f"sweep: clustersim {command}, {len(rows):,} of {total:,} points")
    table.add_column("#", justify="right")
    for key in varying:
        table.add_column(key.removeprefix("inputs."))
    names = {key.removeprefix("inputs.") for key in varying}
    for key in results:  # a result named as an input keeps its prefix
        short = key.removeprefix("result.")
        table.add_column(key if short in names else short, justify="right")
    if errors:
        table.add_column("error")
    for record in flat:
        cells = [str(int(record["seq"] or 0) + 1), *(str(record.get(key, "")) for key in varying)]
        cells += [_cell(record.get(key)) for key in results]
        if errors:
            cells.append(str(record.get("error") or ""))
        table.add_row(*cells)
    return table


def _cell(value: object) -> str:
    """A number to four significant digits, in fixed notation from 0.001 up (``4,702``, ``428.2``, ``0.8076``)."""
    if isinstance(value, float) and not isinstance(value, bool):
        if value == 0 or not 1e-3 <= abs(value) < 1e15:
            return f"{value:.4g}"
        return f"{value:,.{max(0, 3 - math.floor(math.log10(abs(value))))}f}"
    return "" if value is None else str(value)
