"""``clustersim ingest``: what nccl-tests and vLLM's benchmark printed, as cases ``validate`` and ``calibrate`` read."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clustersim.cli.common import CatalogOption, JsonOption, console, emit_json, number, user_errors
from clustersim.units import MAX_NODES


def ingest_command(
    files: Annotated[
        list[Path], typer.Argument(help="nccl-tests outputs (stdout of any *_perf binary, launcher prefixes and all).")
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="The cases file written (JSON Lines).")],
    instance: Annotated[
        str | None, typer.Option("--instance", help="Catalogued instance the run was on, e.g. p5.48xlarge.")
    ] = None,
    nodes: Annotated[
        int | None,
        typer.Option(
            "--nodes", min=1, max=MAX_NODES, help="Servers, where the log lists no '# Rank ... on HOST' lines."
        ),
    ] = None,
    accelerator: Annotated[
        str | None, typer.Option("--accelerator", help="Accelerator id where no --instance (default: the log's GPU).")
    ] = None,
    inter_node_gbps: Annotated[
        float | None,
        typer.Option(
            "--inter-node-gbps",
            callback=number(gt=0, unit="Gbit/s"),
            help="Scale-out Gbit/s per server, for a multi-node run without --instance.",
        ),
    ] = None,
    op: Annotated[
        str | None,
        typer.Option("--op", help="The collective, where neither the log nor the file name says (all_reduce, ...)."),
    ] = None,
    in_place: Annotated[
        bool, typer.Option("--in-place", help="Read the in-place columns (default: out-of-place, as the format says).")
    ] = False,
    model: Annotated[
        str | None,
        typer.Option(
            "--model", help="Serving runs: the model served (zoo id, model TOML or Hugging Face config.json)."
        ),
    ] = None,
    tp: Annotated[int, typer.Option("--tp", min=1, max=1024, help="Serving runs: tensor parallel degree.")] = 1,
    dp: Annotated[int, typer.Option("--dp", min=1, max=4096, help="Serving runs: model replicas.")] = 1,
    precision: Annotated[
        str | None, typer.Option("--precision", help="Serving runs: bf16 (default), fp16, fp8, ...")
    ] = None,
    partial: Annotated[
        bool, typer.Option("--partial", help="Keep the complete rows of a table that ends without its footer.")
    ] = False,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Read nccl-tests output into collective cases and vLLM's serving benchmark (its result block or JSON) into
    inference cases (the format of clustersim/validation/data/README.md): the system from the log where it says,
    else from the options (a serving run's model, devices and layout always); written whole or not at all."""
    from clustersim.catalog.registry import load_catalog
    from clustersim.ingest import SystemOptions, ingest_files, write_cases
    from clustersim.network.collectives import parse_op

    with user_errors():
        loaded = load_catalog(catalog or ())
        options = SystemOptions(
            instance=loaded.instance(instance).id if instance else None,
            nodes=nodes,
            accelerator=loaded.accelerator(accelerator).id if accelerator else None,
            inter_node_gbps=inter_node_gbps,
            op=parse_op(op).value if op else None,
            in_place=in_place,
            model=model,
            tp=tp,
            dp=dp,
            precision=precision,
        )
        cases = ingest_files(files, options, loaded, partial=partial)
        write_cases(cases, output)
    ops = sorted({str(case.get("op", case["kind"])) for case in cases})
    if as_json:
        emit_json({"output": str(output), "cases": len(cases), "ops": ops, "files": [str(f) for f in files]})
        return
    console.print(
        f"wrote {len(cases)} cases ({', '.join(ops)}) from {len(files)} file{'s' if len(files) != 1 else ''} "
        f"to {output}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
