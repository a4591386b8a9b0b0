"""What every command shares: the console, the --catalog and --json options, errors as one line.

Importing this module loads typer and the standard library only: the rich console is made on first
use, so ``clustersim --help`` never pays for rich.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer
from typer.core import TyperGroup

from clustersim.errors import ClusterSimError

if TYPE_CHECKING:
    from rich.console import Console

CATALOG_ENV_VAR = "CLUSTERSIM_CATALOG"  # clustersim.catalog.registry.ENV_VAR (a test keeps them equal)


class _LazyConsole:
    """A rich ``Console`` on stdout (or stderr), made on first use and remade when the stream changes
    (as under typer's test runner), so every run sees the stream and terminal width it was given."""

    def __init__(self, *, stderr: bool = False) -> None:
        self._stderr = stderr
        self._console: Console | None = None
        self._stream: object = None

    def _get(self) -> Console:
        stream = sys.stderr if self._stderr else sys.stdout
        if self._console is None or stream is not self._stream:
            from rich.console import Console

            self._console = Console(stderr=self._stderr)
            self._stream = stream
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get(), name)


console = cast("Console", _LazyConsole())
err_console = cast("Console", _LazyConsole(stderr=True))


class LightGroup(TyperGroup):
    """typer's command group whose --help flag defaults to False rather than None: typer passes a
    missing (None) flag through a pydantic adapter, which would load pydantic (~0.3 s) on the way to
    every subcommand, ``clustersim train --help`` included."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None and option.default is None:
            option.default = False
        return option


CatalogOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--catalog",
        help=f"A directory (or file) of TOML catalog files that extend or override entries; repeatable. "
        f"Also read from ${CATALOG_ENV_VAR}.",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON (numbers in SI units).")]
ModelsOption = Annotated[list[Path] | None, typer.Option("--models", help="Extra model zoo directories.")]


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
    import json

    sys.stdout.write(json.dumps(payload, indent=2) + "\n")


def print_all(*renderables: Any) -> None:
    """Print rich renderables (tables, lines of markup) on the console, in order; ``None`` is skipped."""
    for renderable in renderables:
        if renderable is not None:
            console.print(renderable)


def given_options(ctx: typer.Context, names: Iterable[str]) -> list[str]:
    """The options among ``names`` (parameter names) that the command line gave explicitly, as flags."""
    flags = {param.name: "/".join([*param.opts, *param.secondary_opts]) for param in ctx.command.params if param.name}
    given = []
    for name in names:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"):
            given.append(flags.get(name, name))
    return given


@contextmanager
def option_errors(flags: Mapping[str, str]) -> Iterator[None]:
    """Report a record built from options that fails validation as a ``ClusterSimError`` naming the
    option (``flags`` maps a record's field to its flag) with the value and the rule."""
    from pydantic import ValidationError

    try:
        yield
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else ""
        rule = str(err["msg"]).removeprefix("Value error, ")
        value = err.get("input")
        shown = value.value if isinstance(value, Enum) else value
        raise ClusterSimError(f"{flags.get(field, field)}: value {shown!r}: {rule}") from None
