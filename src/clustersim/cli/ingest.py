"""``clustersim ingest``: what nccl-tests, vLLM's benchmark, Megatron and torchtitan printed, as cases ``validate``
and ``calibrate`` read."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clustersim.cli.common import CatalogOption, JsonOption, console, emit_json, number, user_errors
from clustersim.units import MAX_NODES


def ingest_command(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Tool outputs, each read by the reader its content calls for: nccl-tests stdout, vLLM benchmark "
            "result or JSON, trtllm-bench throughput output, genai-perf/AIPerf LLM metrics table, "
            "Megatron-LM/NeMo/Megatron-Bridge training log, torchtitan log, osu_latency/osu_bw/osu_bibw output, "
            "fi_pingpong table, fio JSON, IOR output, genai-perf/AIPerf CSV or JSON export."
        ),
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="The cases file written (JSON Lines).")],
    instance: Annotated[
        str | None, typer.Option("--instance", help="Catalogued instance the run was on, e.g. p5.48xlarge.")
    ] = None,
    nodes: Annotated[
        int | None,
        typer.Option(
            "--nodes",
            min=1,
            max=MAX_NODES,
            help="Servers, where the log lists no '# Rank ... on HOST' lines; IOR: client machines, where the "
            "output does not say (default 1).",
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
    tp: Annotated[
        int | None,
        typer.Option("--tp", min=1, max=1024, help="Tensor parallel degree (serving: default 1; training: the log's)."),
    ] = None,
    dp: Annotated[
        int | None,
        typer.Option("--dp", min=1, max=65536, help="Model replicas (serving: default 1; training: the log's)."),
    ] = None,
    pp: Annotated[
        int | None, typer.Option("--pp", min=1, max=1024, help="Training logs: pipeline degree, where not logged.")
    ] = None,
    cp: Annotated[
        int | None, typer.Option("--cp", min=1, max=1024, help="Training logs: context parallel degree, if not logged.")
    ] = None,
    global_batch: Annotated[
        int | None,
        typer.Option("--global-batch", min=1, max=10_000_000, help="Training logs: sequences per step, if not logged."),
    ] = None,
    seq_len: Annotated[
        int | None,
        typer.Option("--seq-len", min=1, max=10_000_000, help="Training logs: sequence length, if not logged."),
    ] = None,
    warmup_steps: Annotated[
        int | None,
        typer.Option(
            "--warmup-steps",
            min=0,
            max=1_000_000,
            help="Training logs: steps numbered this or lower are warm-up, left out of the median (default 2).",
        ),
    ] = None,
    precision: Annotated[
        str | None,
        typer.Option("--precision", help="Serving runs: bf16 (default), fp16, fp8, ...; training: the log's."),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            min=1,
            max=1_000_000,
            help="genai-perf/AIPerf and trtllm-bench: requests kept in flight, where the output does not say "
            "(genai-perf/AIPerf default 1; trtllm-bench without it: offline).",
        ),
    ] = None,
    framework: Annotated[
        str | None,
        typer.Option(
            "--framework", help="genai-perf/AIPerf: the serving stack measured (vllm, tensorrt-llm, sglang, ...)."
        ),
    ] = None,
    partial: Annotated[
        bool, typer.Option("--partial", help="Keep the complete rows of a table that ends without its footer.")
    ] = False,
    storage: Annotated[
        str | None,
        typer.Option(
            "--storage",
            help="fio/IOR: compare with this file system, fsx:TIER:CAPACITY[:efa][:mdiops=N] (as 'storage' spells "
            "it), e.g. fsx:SCRATCH_1:14400GiB; without it the measurement alone.",
        ),
    ] = None,
    path: Annotated[
        str | None,
        typer.Option("--path", help="With --storage: the client path, ena, efa or efa-gds (default as 'storage')."),
    ] = None,
    stripes: Annotated[
        int | None,
        typer.Option(
            "--stripes",
            min=1,
            max=10_000,
            help="With --storage: stripes per file (default: the newest default layout).",
        ),
    ] = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Read tool outputs into cases (the format of clustersim/validation/data/README.md), each file by the reader its
    content calls for: nccl-tests output into collective cases; vLLM's serving benchmark (result block or JSON),
    trtllm-bench and genai-perf/AIPerf tables into inference cases; a Megatron-LM/NeMo/Megatron-Bridge or
    torchtitan training log into one training case (the median step after the warm-up; layout and model from
    the log where printed); OSU point-to-point output and fi_pingpong tables into a transport measurement compared
    with the data-path model of one NIC of --instance; fio JSON and IOR output into a storage measurement compared
    with the FSx for Lustre model of --storage (printed, and under 'measurements' in --json; the case format has
    no transport or storage kind). What the output does not say comes from the options, and where both say, they
    must agree; written whole or not at all."""
    from clustersim.catalog.registry import load_catalog
    from clustersim.ingest import StorageOptions, SystemOptions, read_files, write_cases
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
            pp=pp,
            cp=cp,
            global_batch=global_batch,
            seq_len=seq_len,
            warmup_steps=warmup_steps,
            concurrency=concurrency,
            framework=framework,
        )
        storage_options = StorageOptions(storage=storage, path=path, stripes=stripes)
        found = read_files(files, options, loaded, partial=partial, storage=storage_options)
        cases = [case for item in found for case in item.cases]
        if cases:
            write_cases(cases, output)
    ops = sorted({str(case.get("op", case["kind"])) for case in cases})
    measured = [{"file": item.path} | item.measurement for item in found if item.measurement is not None]
    if as_json:
        per_file = [{"file": item.path, "reader": item.reader, "cases": len(item.cases)} for item in found]
        emit_json(
            {
                "output": str(output) if cases else None,
                "cases": len(cases),
                "ops": ops,
                "files": [str(f) for f in files],
                "read": per_file,
                "measurements": measured,
            }
        )
        return
    for item in found:
        count = f"{len(item.cases)} case{'' if len(item.cases) == 1 else 's'}"
        console.print(f"{item.path}: {item.reader} reader, {count}", markup=False, highlight=False)
        for text in (item.measurement or {}).get("lines", []):
            console.print(f"  {text}", markup=False, highlight=False, soft_wrap=True)
    if not cases:
        console.print(f"no cases to write (measurements only): {output} left as it was", markup=False)
        return
    console.print(
        f"wrote {len(cases)} cases ({', '.join(ops)}) from {len(files)} file{'s' if len(files) != 1 else ''} "
        f"to {output}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
