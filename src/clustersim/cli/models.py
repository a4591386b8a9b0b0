"""``clustersim models``: the model zoo, or one model's shape, parameters and FLOPs per token."""

from typing import Annotated

import typer

from clustersim.cli.common import JsonOption, ModelsOption, emit_json, print_all, user_errors


def models_command(
    model: Annotated[
        str | None, typer.Argument(help="A zoo id, model TOML or HF config.json to describe; omit to list the zoo.")
    ] = None,
    models: ModelsOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the model zoo, or describe one model: shape, parameters, FLOPs per token, source."""
    from clustersim.workload.zoo import load_entry, zoo

    with user_errors():
        entries = [load_entry(model, extra_dirs=models or ())] if model else list(zoo(models or ()).values())
    from clustersim.present.zoo import model_json, zoo_table

    rows = [model_json(entry) for entry in sorted(entries, key=lambda e: e.model.name)]
    if as_json:
        emit_json(rows[0] if model else rows)
        return
    print_all(zoo_table(rows, "model zoo" if model is None else rows[0]["name"]))
