"""The model zoo as JSON rows and a rich table: shape, exact parameters, FLOPs per token, source."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table

from clustersim.units import format_count
from clustersim.workload.zoo import ZooEntry


def model_json(entry: ZooEntry) -> dict[str, Any]:
    """The model's fields, its total and active parameters, model FLOPs per token, the other ids it answers to
    and its source."""
    model = entry.model
    return {
        **model.model_dump(mode="json"),
        "params": model.num_params(),
        "active_params": model.active_params(),
        "model_flops_per_token": model.model_flops_per_token(),
        "context_tokens": model.context_tokens,
        "aliases": list(entry.aliases),
        "source": entry.source,
    }


def weights_label(quantization: dict[str, Any] | None) -> str:
    """How a checkpoint stores its weights: ``16-bit``, or e.g. ``4-bit awq`` or ``4-bit mxfp4 (experts)``."""
    if not quantization:
        return "16-bit"
    where = " (experts)" if quantization["experts_only"] else ""
    return f"{quantization['bits']}-bit {quantization['method']}{where}"


def _layers_label(row: dict[str, Any]) -> str:
    """The layers, and of them a hybrid's recurrent ones (``48 (36 linear)``; Mamba-2: ``29 (23 mamba2)``) and those
    with no MLP (``29 (23 mamba2, 6 no MLP)``)."""
    linear, parts = row.get("linear_attention"), []
    if linear:
        parts.append(f"{linear['layers']} {'mamba2' if linear.get('kind') == 'mamba2' else 'linear'}")
    if row.get("mlp_free_layers"):
        parts.append(f"{row['mlp_free_layers']} no MLP")
    return f"{row['layers']} ({', '.join(parts)})" if parts else str(row["layers"])


def zoo_table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    """One line per model (rows from ``model_json``): parameters, model FLOPs per token (training: forward
    and backward, at the model's sequence length), shape, how its checkpoint stores the weights and source."""
    table = Table(title=title)
    columns = (
        "name",
        "params",
        "active",
        "FLOPs/token",
        "layers",
        "hidden",
        "heads/kv",
        "ffn",
        "vocab",
        "seq",
        "context",
        "weights",
        "source",
    )
    for column in columns:
        table.add_column(column, overflow="fold", justify="left" if column in ("name", "source") else "right")
    for row in rows:
        table.add_row(
            row["name"],
            format_count(row["params"]),
            format_count(row["active_params"]),
            format_count(row["model_flops_per_token"]),
            _layers_label(row),
            str(row["hidden"]),
            f"{row['heads']}/{row['kv_heads']}",
            f"{row['ffn_hidden']} {'clamped ' if row.get('clamped_glu') else ''}{row['ffn_type']}"
            + (f" x{row['moe']['experts']}" if row["moe"] else "")
            + (f" in {row['moe']['latent']}" if row["moe"] and row["moe"].get("latent") else ""),
            str(row["vocab"]),
            str(row["seq_len"]),
            f"{row['context_tokens']}" if row.get("context_tokens") else "-",
            weights_label(row.get("quantization")),
            row["source"],
        )
    return table
