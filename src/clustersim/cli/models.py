"""``clustersim models``: the model zoo, or one model's shape, parameters and FLOPs per token."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from clustersim.cli.common import JsonOption, console, emit_json, user_errors
from clustersim.units import format_count
from clustersim.workload.transformer import Transformer
from clustersim.workload.zoo import ZooEntry, load_entry, zoo


def models_command(
    model: Annotated[
        str | None, typer.Argument(help="A zoo id, model TOML or HF config.json to describe; omit to list the zoo.")
    ] = None,
    models: Annotated[list[Path] | None, typer.Option("--models", help="Extra model zoo directories.")] = None,
    as_json: JsonOption = False,
) -> None:
    """List the model zoo, or describe one model: shape, parameters, FLOPs per token, source."""
    with user_errors():
        entries = [load_entry(model, extra_dirs=models or ())] if model else list(zoo(models or ()).values())
    rows = [_row(entry) for entry in sorted(entries, key=lambda e: e.model.name)]
    if as_json:
        emit_json(rows[0] if model else rows)
        return
    table = Table(title="model zoo" if model is None else rows[0]["name"])
    columns = ("name", "params", "active", "layers", "hidden", "heads/kv", "ffn", "vocab", "seq", "source")
    for column in columns:
        table.add_column(column, overflow="fold", justify="left" if column in ("name", "source") else "right")
    for row in rows:
        table.add_row(
            row["name"],
            format_count(row["params"]),
            format_count(row["active_params"]),
            str(row["layers"]),
            str(row["hidden"]),
            f"{row['heads']}/{row['kv_heads']}",
            f"{row['ffn_hidden']} {row['ffn_type']}" + (f" x{row['moe']['experts']}" if row["moe"] else ""),
            str(row["vocab"]),
            str(row["seq_len"]),
            row["source"],
        )
    console.print(table)


def _row(entry: ZooEntry) -> dict[str, Any]:
    model: Transformer = entry.model
    return {
        **model.model_dump(mode="json"),
        "params": model.num_params(),
        "active_params": model.active_params(),
        "model_flops_per_token": model.model_flops_per_token(),
        "source": entry.source,
    }
