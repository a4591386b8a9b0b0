"""``plan``'s recipe options for its 8- and 4-bit points: the layers kept in BF16 (``--bf16-layers``) and the
groups of operations run in a wider format (``--operation-format``), each refused where no precision tried is 8- or
4-bit, and where a point could not have it."""

from typing import TYPE_CHECKING

from clustersim.compute.precision import QUANTIZED_FORMATS
from clustersim.errors import ClusterSimError

if TYPE_CHECKING:
    from clustersim.catalog.registry import Catalog
    from clustersim.compute.software import SoftwareProfile
    from clustersim.plan.planner_grid import PlanGrid
    from clustersim.workload.transformer import Transformer


def _refuse_sixteen_bit(grid: "PlanGrid", flag: str, value: object, what: str) -> None:
    if not any(p.strip().lower() in QUANTIZED_FORMATS for p in grid.precisions):
        raise ClusterSimError(
            f"{flag} {value}: every --precision tried ({', '.join(grid.precisions)}) runs every layer in 16 bits; "
            f"{what} need fp8, mxfp8, nvfp4 or mxfp4",
            field=flag,
            value=value,
        )


def bf16_layers_in(
    table: dict[str, "SoftwareProfile"], bf16_layers: int, grid: "PlanGrid", model: "Transformer"
) -> tuple[dict[str, "SoftwareProfile"], list[str]]:
    """The profiles keeping ``bf16_layers`` layers of every 8- or 4-bit point in BF16, and a note saying so; refused
    where no --precision tried is 8- or 4-bit, or beyond the model's layers (``compute.bf16_layers``)."""
    from clustersim.catalog.schema import Dtype
    from clustersim.compute.bf16_layers import check_bf16_layers, framework_layers

    if not bf16_layers:
        return table, []
    _refuse_sixteen_bit(grid, "--bf16-layers", bf16_layers, "BF16 layers")
    check_bf16_layers(model, bf16_layers, Dtype.FP8, field="--bf16-layers")
    note = f"{bf16_layers} of {model.name}'s {framework_layers(model)} layers in BF16 at the 8- and 4-bit precisions"
    return {name: p.model_copy(update={"bf16_layers": bf16_layers}) for name, p in table.items()}, [note]


def operation_formats_in(
    table: dict[str, "SoftwareProfile"],
    values: list[str] | None,
    grid: "PlanGrid",
    model: "Transformer",
    catalog: "Catalog",
) -> tuple[dict[str, "SoftwareProfile"], list[str]]:
    """The profiles running ``--operation-format`` groups of every 8- or 4-bit point in their wider formats, and a
    note saying so; refused where no --precision tried is 8- or 4-bit, and where a group or format cannot apply at an
    8- or 4-bit point the grid prices (``compute.operation_formats``: a group the model lacks, a format not wider
    than the point's or that its chip does not run)."""
    from clustersim.cli.job_options import operation_formats
    from clustersim.compute.operation_formats import check_operation_formats
    from clustersim.compute.precision import is_low_precision, job_dtype, parse_training_format, runs_on

    formats = operation_formats(values)
    if not formats:
        return table, []
    said = ", ".join(f"{group}={fmt}" for group, fmt in formats.items())
    _refuse_sixteen_bit(grid, "--operation-format", said, "operation formats")
    chips = {catalog.instance(name).accelerator for name in grid.instances}
    for text in grid.precisions:
        fmt = parse_training_format(text, "--precision")
        for chip in map(catalog.accelerator, sorted(chips)):
            if is_low_precision(job_dtype(fmt)) and runs_on(fmt, chip):  # a point the grid prices
                check_operation_formats(model, formats, job_dtype(fmt), chip, field="--operation-format")
    note = f"operation formats at the 8- and 4-bit precisions: {said}"
    return {name: p.model_copy(update={"operation_formats": dict(formats)}) for name, p in table.items()}, [note]
