"""What every command shares: the console, the --catalog and --json options, errors as one line."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from clustersim.catalog.registry import ENV_VAR
from clustersim.errors import ClusterSimError

console = Console()
err_console = Console(stderr=True)

CatalogOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--catalog",
        help=f"A directory (or file) of TOML catalog files that extend or override entries; repeatable. "
        f"Also read from ${ENV_VAR}.",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON (numbers in SI units).")]


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn a user mistake into one line on stderr and exit code 2, never a traceback."""
    try:
        yield
    except ClusterSimError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(code=2) from None


def emit_json(payload: Any) -> None:
    """Write ``payload`` as JSON on stdout."""
    sys.stdout.write(json.dumps(payload, indent=2) + "\n")
