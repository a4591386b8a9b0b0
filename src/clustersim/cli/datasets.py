"""``clustersim datasets``: the request-length datasets (``serve``/``plan --dataset``), or one set's figures
with their sources."""

from typing import Annotated

import typer

from clustersim.cli.common import JsonOption, emit_json, print_all, user_errors


def datasets_command(
    dataset: Annotated[str | None, typer.Argument(help="A request set to describe; omit to list them all.")] = None,
    as_json: JsonOption = False,
) -> None:
    """List the request-length datasets (packaged, and $CLUSTERSIM_SERVING_DATASETS files), or describe one:
    its prompt and output length statistics, each with its provenance, confidence and source."""
    from clustersim.serving.datasets import request_dataset, request_datasets

    with user_errors():
        found = [request_dataset(dataset)] if dataset is not None else list(request_datasets().values())
    from clustersim.present.datasets import dataset_json, dataset_view, datasets_table

    rows = [dataset_json(entry) for entry in sorted(found, key=lambda d: d.name)]
    if as_json:
        emit_json(rows[0] if dataset is not None else rows)
        return
    print_all(*(dataset_view(rows[0]) if dataset is not None else [datasets_table(rows)]))
