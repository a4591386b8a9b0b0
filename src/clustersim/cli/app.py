"""The ``clustersim`` command: a thin layer over the Python API, one module per command.

Start-up is part of the interface: importing the command modules loads typer, the standard library
and the light enums only (each command imports the models when it runs), and help is plain text,
since typer's rich help alone costs more than the rest of the start-up (``benchmarks/bench_startup.py``).
"""

from typing import Annotated

import typer

from clustersim import __version__
from clustersim.cli.calibrate import calibrate_command
from clustersim.cli.collective import collective_command
from clustersim.cli.common import LightGroup
from clustersim.cli.datasets import datasets_command
from clustersim.cli.explain import explain_command
from clustersim.cli.fabric import fabric_app
from clustersim.cli.hw import hw_app
from clustersim.cli.ingest import ingest_command
from clustersim.cli.models import models_command
from clustersim.cli.plan import plan_command
from clustersim.cli.probe import probe_command
from clustersim.cli.reliability import reliability_command
from clustersim.cli.report import report_command
from clustersim.cli.serve import serve_command
from clustersim.cli.storage import storage_app
from clustersim.cli.sweep import sweep_app
from clustersim.cli.train import train_command
from clustersim.cli.transport import transport_app
from clustersim.cli.validate import validate_command

app = typer.Typer(
    name="clustersim",
    help="Simulate and plan large-scale ML training and inference clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    cls=LightGroup,
)
app.add_typer(hw_app, name="hw")
app.add_typer(fabric_app, name="fabric")
app.add_typer(transport_app, name="transport")
app.command("collective")(collective_command)
app.command("models")(models_command)
app.command("datasets")(datasets_command)
app.command("train")(train_command)
app.command("validate")(validate_command)
app.command("serve")(serve_command)
app.add_typer(storage_app, name="storage")
app.command("reliability")(reliability_command)
app.add_typer(sweep_app, name="sweep")
app.command("plan")(plan_command)
app.command("ingest")(ingest_command)
app.command("calibrate")(calibrate_command)
app.command("probe")(probe_command)
app.command("report")(report_command)
app.command("explain")(explain_command)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"clustersim {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """Simulate and plan large-scale ML training and inference clusters."""


def main() -> None:
    """Entry point of the ``clustersim`` script."""
    app()
