"""``clustersim hw``: browse the hardware catalog (list, show, compare)."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clustersim.catalog.kinds import Kind
from clustersim.cli.common import CatalogOption, JsonOption, LightGroup, emit_json, print_all, user_errors
from clustersim.errors import ClusterSimError

if TYPE_CHECKING:
    from clustersim.catalog.registry import Catalog

hw_app = typer.Typer(
    help="Browse the hardware catalog: accelerators, links, instances, storage.",
    no_args_is_help=True,
    rich_markup_mode=None,
    cls=LightGroup,
)


def _catalog(paths: list[Path] | None) -> "Catalog":
    from clustersim.catalog.registry import load_catalog

    return load_catalog(paths or ())


@hw_app.command("list")
def hw_list(
    kind: Annotated[
        Kind | None, typer.Option("--kind", case_sensitive=False, help="Only entries of this kind.")
    ] = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """List catalog entries with a few key figures each."""
    with user_errors():
        entries = _catalog(catalog).list(kind)
    from clustersim.present import catalog as present

    if as_json:
        emit_json(present.list_json(entries))
        return
    print_all(present.list_table(entries, kind))


@hw_app.command("show")
def hw_show(
    name: Annotated[str, typer.Argument(help="Id or alias, e.g. h100-sxm, 'H100 SXM5', p5en.48xlarge.")],
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show every field of one entry with its unit and source."""
    with user_errors():
        cat = _catalog(catalog)
        entry = cat.get(name)
    from clustersim.present import catalog as present

    if as_json:
        emit_json(present.show_json(entry, cat.origins[entry.id]))
        return
    print_all(*present.show_view(entry))


@hw_app.command("compare")
def hw_compare(
    names: Annotated[list[str], typer.Argument(help="Two or more ids or aliases; ratios are to the first.")],
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Compare entries side by side, with each figure's ratio to the first entry."""
    with user_errors():
        if len(names) < 2:
            raise ClusterSimError(
                f"compare needs at least two entries, got {len(names)}: {', '.join(names)}", field="names"
            )
        cat = _catalog(catalog)
        entries = [cat.get(name) for name in names]
        kinds = {e.kind for e in entries}
        if len(kinds) > 1:
            listed = ", ".join(f"{e.id} ({e.kind.value})" for e in entries)
            raise ClusterSimError(f"compare entries of one kind; got {listed}", field="names")
    from clustersim.catalog.instance_figures import compare_instances, instances_of
    from clustersim.present import catalog as present

    instances = instances_of(entries)
    figures = compare_instances(cat, instances) if instances else []
    if as_json:
        emit_json(present.compare_json(entries, figures))
        return
    if figures:
        print_all(present.figures_table([e.id for e in entries], figures))
    print_all(present.compare_table(entries))
