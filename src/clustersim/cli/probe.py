"""``clustersim probe``: measure this machine with torch (GEMM, memory, copies, collectives, storage), print
the collectives as nccl-tests' tables and write them as cases ``clustersim calibrate`` reads."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clustersim.cli.common import CatalogOption, JsonOption, console, emit_json, number, print_all, user_errors
from clustersim.cli.progress import progress_bar
from clustersim.units import MAX_NODES

if TYPE_CHECKING:
    from clustersim.probe import ProbeResult


def _split(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(part.strip() for part in text.split(",") if part.strip())


def _gemm_sizes(text: str | None) -> tuple[int, ...] | None:
    from clustersim.errors import ClusterSimError

    parts = _split(text)
    if parts is None:
        return None
    sizes = []
    for part in parts or ("",):
        if not part.isdigit() or int(part) < 1:
            raise ClusterSimError(
                f"--gemm-sizes {part!r}: valid: whole numbers >= 1 (M = N = K), e.g. 1024,4096",
                field="--gemm-sizes",
                value=part,
            )
        sizes.append(int(part))
    return tuple(sizes)


def probe_command(
    what: Annotated[
        str | None,
        typer.Option(
            "--what", help="Comma list of gemm, memory, copy, collectives, storage (default: all that apply here)."
        ),
    ] = None,
    device: Annotated[str | None, typer.Option("--device", help="cpu or cuda (default: cuda when available).")] = None,
    ranks: Annotated[
        int | None, typer.Option("--ranks", help="Local ranks for collectives (default: the GPUs; 2 on the CPU).")
    ] = None,
    sizes: Annotated[
        str | None,
        typer.Option("--sizes", help="Collective sizes, comma list: 1M,16M (1024-based as nccl-tests' -b), 4MiB."),
    ] = None,
    gemm_sizes: Annotated[
        str | None, typer.Option("--gemm-sizes", help="GEMM sizes M = N = K, comma list (e.g. 1024,4096).")
    ] = None,
    dtypes: Annotated[
        str | None, typer.Option("--dtypes", help="GEMM formats: bf16,fp16,fp32 and fp8 where the GPU has it.")
    ] = None,
    buffer_bytes: Annotated[
        str | None, typer.Option("--buffer-bytes", help="Buffer of the memory and copy tests (e.g. 1GiB).")
    ] = None,
    path: Annotated[
        Path | None, typer.Option("--path", help="Directory the storage test writes to and reads from.")
    ] = None,
    writers: Annotated[int | None, typer.Option("--writers", help="Parallel writers of the storage test (4).")] = None,
    file_bytes: Annotated[
        str | None, typer.Option("--file-bytes", help="Bytes each storage writer writes (e.g. 256MiB).")
    ] = None,
    repeats: Annotated[int | None, typer.Option("--repeats", help="Timed repetitions of each measurement.")] = None,
    warmup: Annotated[int | None, typer.Option("--warmup", help="Untimed runs before the repetitions.")] = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write the collectives as cases (JSON Lines).")
    ] = None,
    instance: Annotated[
        str | None, typer.Option("--instance", help="Catalogued instance the cases are of, e.g. p5.48xlarge.")
    ] = None,
    nodes: Annotated[
        int | None, typer.Option("--nodes", min=1, max=MAX_NODES, help="Servers of the run (checked).")
    ] = None,
    accelerator: Annotated[
        str | None,
        typer.Option(
            "--accelerator",
            help="Accelerator id of the cases (and of the peaks, where the GPU's name is not catalogued).",
        ),
    ] = None,
    inter_node_gbps: Annotated[
        float | None,
        typer.Option("--inter-node-gbps", callback=number(gt=0, unit="Gbit/s"), help="Scale-out Gbit/s per server."),
    ] = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Measure this machine with torch: GEMM TFLOP/s by format and size, memory bandwidth (copy, triad), host-device
    copies, collectives through torch.distributed (nccl-tests' table; -o writes them as cases calibrate reads) and
    fsync'd parallel file writes and reads; each the median of timed repetitions after warm-up, with its spread."""
    from clustersim.catalog.registry import load_catalog
    from clustersim.ingest import SystemOptions, write_cases
    from clustersim.probe import ProbeOptions, run_probe

    with user_errors():
        loaded = load_catalog(catalog or ())
        options = ProbeOptions(
            what=_split(what),
            device=device,
            ranks=ranks,
            sizes=_split(sizes),
            gemm_sizes=_gemm_sizes(gemm_sizes),
            dtypes=_split(dtypes),
            buffer_bytes=buffer_bytes,
            path=path,
            writers=writers,
            file_bytes=file_bytes,
            repeats=repeats,
            warmup=warmup,
            output=output,
            system=SystemOptions(
                instance=loaded.instance(instance).id if instance else None,
                nodes=nodes,
                accelerator=loaded.accelerator(accelerator).id if accelerator else None,
                inter_node_gbps=inter_node_gbps,
            ),
        )
        with progress_bar("probe", "steps") as progress:
            result = run_probe(options, loaded, progress)
        if result is None:
            return  # a torchrun rank other than 0: rank 0 reports
        cases = result.cases(options, loaded) if output is not None else []
        if output is not None:
            write_cases(cases, output)
    if as_json:
        emit_json(result.as_dict() | {"output": str(output) if output else None, "cases": len(cases)})
        return
    _print(result)
    if output is not None:
        console.print(f"wrote {len(cases)} collective cases to {output}", markup=False, highlight=False)


def _spread(low: float, high: float) -> str:
    return f"{low:.3g}-{high:.3g}"


def _percent(fraction: float | None) -> str:
    return "-" if fraction is None else f"{100 * fraction:.1f}%"


def _print(result: ProbeResult) -> None:
    from rich.table import Table

    data = result.as_dict()
    head = data["device"]
    console.print(
        f"{head['name']} ({head['kind']}, {head['accelerator'] or 'not catalogued'}) on {head['host']}; "
        f"{data['software']}; median of {data['repeats']} after {data['warmup']} warm-up",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    tables: list[Any] = []
    if data["gemm"]:
        gemm = Table(title="GEMM (M = N = K)")
        for column in ("dtype", "M=N=K", "TFLOP/s", "p10-p90", "min-max", "peak", "of peak"):
            gemm.add_column(column, justify="left" if column == "dtype" else "right")
        for row in data["gemm"]:
            peak = row["peak_tflops"]
            gemm.add_row(
                row["dtype"], str(row["m"]), f"{row['tflops']:.4g}", _spread(row["tflops_p10"], row["tflops_p90"]),
                _spread(row["tflops_min"], row["tflops_max"]), "-" if peak is None else f"{peak:g}",
                _percent(row["fraction_of_peak"]),
            )  # fmt: skip
        tables.append(gemm)
    for key, title in (("memory", "device memory (STREAM bytes)"), ("copy", "host-device copies"),
                       ("storage", "storage (aggregate, fsync'd writes)")):  # fmt: skip
        if not data[key]:
            continue
        table = Table(title=title)
        for column in ("what", "bytes", "GB/s", "p10-p90", "min-max", "peak", "of peak"):
            table.add_column(column, justify="left" if column == "what" else "right")
        for row in data[key]:
            peak = row.get("peak_GBps")
            size = row.get("total_bytes", row.get("buffer_bytes"))
            table.add_row(
                row["name"], f"{size:,}", f"{row['GBps']:.4g}", _spread(row["GBps_p10"], row["GBps_p90"]),
                _spread(row["GBps_min"], row["GBps_max"]), "-" if peak is None else f"{peak:g}",
                _percent(row.get("fraction_of_peak")),
            )  # fmt: skip
        tables.append(table)
    print_all(*tables)
    for line in result.collective_lines():
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for name, why in data["skipped"].items():
        console.print(f"{name}: {why}", markup=False, highlight=False, soft_wrap=True)
