"""What every command shares: the console, the --catalog and --json options, errors as one line.

Importing this module loads typer and the standard library only: the rich console is made
on first use, so ``clustersim --help`` never pays for rich.

Errors: a user mistake (``ClusterSimError``) and a usage error (an unknown option, a value the option's
type refuses) are one line on stderr and exit code 2; with ``--json`` the line is a JSON object
``{"error": ..., "field": ..., "value": ...}``. Anything else is a bug: one line saying so, exit code 3
(``CLUSTERSIM_TRACEBACK=1`` shows the traceback instead).
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar, cast

import typer
from typer._click import exceptions as click_errors  # typer's own (vendored) click: its exception types
from typer._click.globals import get_current_context
from typer.core import TyperGroup

from clustersim.errors import ClusterSimError, shown

if TYPE_CHECKING:
    from rich.console import Console

CATALOG_ENV_VAR = "CLUSTERSIM_CATALOG"  # clustersim.catalog.registry.ENV_VAR (a test keeps them equal)
TRACEBACK_ENV_VAR = "CLUSTERSIM_TRACEBACK"
USER_ERROR_EXIT = 2
BUG_EXIT = 3
PIPED_WIDTH = 10_000  # output that is not a terminal is not wrapped (grep, awk and scripts read it)
MAX_MESSAGE_CHARS = 2_000
_LONG_RUN = re.compile(r"\S{200,}")


def _width(stream: Any) -> int | None:
    """The console width for ``stream``: the terminal's (rich reads $COLUMNS, else asks the terminal), and
    no wrapping where it is not a terminal (a pipe, a file), whatever $COLUMNS says."""
    isatty = getattr(stream, "isatty", None)
    return None if callable(isatty) and isatty() else PIPED_WIDTH


def _titles_on_one_line(renderable: Any) -> None:
    """Widen a table (and the tables of a group) to its title and caption, so that unwrapped output (a
    pipe, a file) has each on one line: rich wraps them to the table's width otherwise."""
    from rich.console import Group
    from rich.errors import MarkupError
    from rich.table import Table
    from rich.text import Text

    if isinstance(renderable, Group):
        for part in renderable.renderables:
            _titles_on_one_line(part)
    if not isinstance(renderable, Table):
        return
    widths = [renderable.min_width or 0]
    for text in (renderable.title, renderable.caption):
        if isinstance(text, Text):
            widths.append(text.cell_len)
        elif isinstance(text, str):
            try:
                widths.append(Text.from_markup(text).cell_len)
            except MarkupError:
                widths.append(len(text))
    renderable.min_width = max(widths) or None


class _LazyConsole:
    """A rich ``Console`` on stdout (or stderr), made on first use and remade when the stream changes
    (as under typer's test runner), so every run sees the stream and terminal width it was given;
    output to a pipe or a file is not wrapped."""

    def __init__(self, *, stderr: bool = False) -> None:
        self._stderr = stderr
        self._console: Console | None = None
        self._stream: object = None

    def _get(self) -> Console:
        stream = sys.stderr if self._stderr else sys.stdout
        if self._console is None or stream is not self._stream:
            from rich.console import Console

            self._console = Console(stderr=self._stderr, width=_width(stream))
            self._stream = stream
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get(), name)


console = cast("Console", _LazyConsole())
err_console = cast("Console", _LazyConsole(stderr=True))


def one_line(message: str) -> str:
    """``message`` on one line, with any very long run of characters (a pasted value) shortened."""
    flat = " ".join(message.split())
    flat = _LONG_RUN.sub(lambda m: shown(m.group(0), 120).strip("'\""), flat)
    return flat if len(flat) <= MAX_MESSAGE_CHARS else flat[: MAX_MESSAGE_CHARS - 1] + "…"


def _json_value(value: object) -> object:
    if value is None or isinstance(value, bool | int | str):
        return one_line(value) if isinstance(value, str) and len(value) > 200 else value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Enum):
        return _json_value(value.value)
    return one_line(shown(value, 200))


def _field_of(message: str) -> str | None:
    """The option or field a message names, where the raiser did not: the option it starts with (``--tp:
    ...``), else the first ``field 'x'`` it names, else ``file`` for a message about a file (``path, line
    3: ...``)."""
    match = re.match(r"^(--[a-z][a-z0-9-]*|[A-Za-z_][\w.]*)(?=[:\s])", message)
    if match and match.group(1).startswith("--"):
        return match.group(1)
    named = re.match(r"^([a-z][a-z0-9_.]*): ", message)  # "model: llama3.1-405b at bf16 needs ..."
    if named:
        return named.group(1)
    named = re.search(r"\bfield '([^']{1,200})'", message)
    if named:
        return named.group(1)
    return "file" if re.match(r"^[^\s:,]*[/\\][^\s:,]*[:,]", message) else None


def report_error(message: str, *, field: str | None = None, value: object = None, as_json: bool = False) -> None:
    """Write one error line on stderr: ``error: message``, or with ``as_json`` a JSON object."""
    text = one_line(message)
    if as_json:
        import json

        payload = {"error": text, "field": field or _field_of(text), "value": _json_value(value)}
        sys.stderr.write(json.dumps(payload, allow_nan=False) + "\n")
    else:
        sys.stderr.write(f"error: {text}\n")
    sys.stderr.flush()


def _wants_json() -> bool:
    """Whether the running command was given --json."""
    ctx = get_current_context(silent=True)
    while ctx is not None:
        if ctx.params.get("as_json"):
            return True
        ctx = ctx.parent
    return False


class LightGroup(TyperGroup):
    """typer's command group with two changes.

    Its --help flag defaults to False rather than None: typer passes a missing (None) flag through a
    pydantic adapter, which would load pydantic (~0.3 s) on the way to every subcommand,
    ``clustersim train --help`` included.

    As the top-level command, a usage error (an unknown option, a value an option's type refuses) is
    one line on stderr with exit code 2 (JSON with --json) rather than click's usage block, and an
    unexpected exception is reported as a bug in one line with exit code 3.
    """

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None and option.default is None:
            option.default = False
        return option

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        argv = list(sys.argv[1:] if args is None else args)
        try:
            _refuse_repeated_options(self, argv)
            code = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except click_errors.NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click_errors.ClickException as exc:
            _usage_error(exc, argv, as_json="--json" in argv)
        except (typer.Abort, KeyboardInterrupt):
            sys.stderr.write("Aborted!\n")
            sys.exit(1)
        except Exception as exc:  # a bug: say so in one line (the traceback on request)
            if os.environ.get(TRACEBACK_ENV_VAR):
                raise
            _bug(exc, as_json="--json" in argv)
        sys.exit(code if isinstance(code, int) else 0)


def _refuse_repeated_options(group: TyperGroup, argv: Sequence[str]) -> None:
    """An option that takes one value, given twice, is refused naming both values: click keeps the last
    and drops the first silently (``--routing ecmp --routing spray`` ran spray)."""
    command: Any = group
    for word in (a for a in argv if a != "--json"):
        if word.startswith("-") or not hasattr(command, "get_command"):
            break
        command = command.get_command(command.make_context(command.name, [], resilient_parsing=True), word) or command
    for param in getattr(command, "params", []):
        if getattr(param, "param_type_name", "") != "option" or param.multiple or param.count:
            continue
        given = [
            arg[len(opt) + 1 :] if "=" in arg else (argv[i + 1] if i + 1 < len(argv) and not param.is_flag else arg)
            for i, arg in enumerate(argv)
            for opt in [*param.opts, *param.secondary_opts]
            if arg == opt or arg.startswith(opt + "=")
        ]
        if len(given) > 1:
            name = max(param.opts, key=len)
            raise click_errors.BadParameter(
                f"given {len(given)} times ({', '.join(given)}); give it once", param=param, param_hint=name
            )


def _given_value(argv: Sequence[str], opts: Sequence[str]) -> str | None:
    """The value the command line gave an option (``--tp 0`` or ``--tp=0``), the last one if repeated."""
    found = None
    for i, arg in enumerate(argv):
        for opt in opts:
            if arg == opt and i + 1 < len(argv):
                found = argv[i + 1]
            elif arg.startswith(opt + "="):
                found = arg[len(opt) + 1 :]
    return found


def _usage_error(exc: click_errors.ClickException, argv: Sequence[str], *, as_json: bool) -> NoReturn:
    ctx = getattr(exc, "ctx", None)
    where = f"{ctx.command_path}: " if ctx is not None else ""
    hint = f" (see {ctx.command_path} --help)" if ctx is not None else ""
    field = value = None
    param = getattr(exc, "param", None)
    message = exc.format_message().replace("Value error, ", "")
    if param is not None and getattr(param, "opts", None):
        field = max(param.opts, key=len)
        value = _given_value(argv, param.opts)
        if value is not None and value not in message:
            message += f" (got {shown(value)})"
    elif isinstance(exc, click_errors.NoSuchOption):
        field = value = exc.option_name
    elif isinstance(exc, click_errors.UsageError):
        field = "arguments"  # extra or missing arguments: the command line itself
    report_error(f"{where}{message}{hint}", field=field, value=value, as_json=as_json)
    sys.exit(USER_ERROR_EXIT if exc.exit_code in (1, 2) else exc.exit_code)


def _bug(exc: BaseException, *, as_json: bool) -> NoReturn:
    report_error(
        f"internal error (a bug in clustersim, please report it with the command line): {type(exc).__name__}: "
        f"{exc}; set {TRACEBACK_ENV_VAR}=1 for the traceback",
        as_json=as_json,
    )
    sys.exit(BUG_EXIT)


def number(*, gt: float | None = None, ge: float | None = None, le: float | None = None, unit: str = "") -> Any:
    """An option callback that keeps a float option finite and in range: ``nan``, ``inf`` and values out
    of range are refused at the command line, naming the option, the value and the valid range."""
    bounds = [f"{sign} {bound:g}" for sign, bound in ((">", gt), (">=", ge), ("<=", le)) if bound is not None]
    valid = "a finite number" + (" " + " and ".join(bounds) if bounds else "") + (f" {unit}" if unit else "")

    def check(value: float | None) -> float | None:
        if value is None:
            return None
        below = (gt is not None and not value > gt) or (ge is not None and not value >= ge)
        if not math.isfinite(value) or below or (le is not None and not value <= le):
            raise typer.BadParameter(f"{value!r} is out of range (valid: {valid})")
        return value

    return check


# Figure formats --plot writes (matplotlib picks the format by the suffix; raw buffers, PGF and AVIF left out).
PLOT_SUFFIXES = (".png", ".svg", ".svgz", ".pdf", ".eps", ".ps", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".gif")


def plot_path(value: Path | None) -> Path | None:
    """The ``--plot`` callback every command shares: a file whose suffix names a format matplotlib writes,
    not a directory (matplotlib would write ``DIR.png`` beside it) nor an empty name (a hidden ``.png``)."""
    if value is None:
        return None
    formats = ", ".join(PLOT_SUFFIXES)
    if str(value) in ("", ".") or value.is_dir():
        shown_as = "an empty name is" if str(value) in ("", ".") else f"{str(value)!r} is a directory,"
        raise typer.BadParameter(f"{shown_as} not a file to write; give a file name ending in one of {formats}")
    if value.suffix.lower() not in PLOT_SUFFIXES:
        given = f"suffix {value.suffix!r}" if value.suffix else "no suffix"
        raise typer.BadParameter(f"{str(value)!r} has {given}; the figure's format comes from it: one of {formats}")
    return value


def write_figure(draw: Callable[[], object], path: Path) -> None:
    """``draw()`` (which writes the figure to ``path``); a path that cannot be written is refused naming
    ``--plot``, the path and why, in the same words for every command."""
    try:
        draw()
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise ClusterSimError(f"--plot: cannot write {path}: {why}", field="--plot", value=str(path)) from None
    except ValueError as exc:
        raise ClusterSimError(f"--plot: cannot write {path}: {exc}", field="--plot", value=str(path)) from None


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
    """Turn a user mistake into one line on stderr and exit code 2, never a traceback; when the running
    command was given --json, the line is JSON: ``{"error": ..., "field": ..., "value": ...}``."""
    try:
        yield
    except ClusterSimError as exc:
        field = exc.field or _option_given(exc.value)
        report_error(str(exc), field=field, value=exc.value, as_json=_wants_json())
        raise typer.Exit(code=USER_ERROR_EXIT) from None


def _option_given(value: object) -> str | None:
    """The option of the running command that was given ``value`` (a raw text its command parsed later,
    such as ``--tokens 15X``), for an error whose raiser did not know which option it came from."""
    ctx = get_current_context(silent=True)
    if ctx is None or value is None or isinstance(value, bool):
        return None
    for param in ctx.command.params:
        given = ctx.params.get(param.name or "")
        if given is not None and not isinstance(given, bool) and given == value and getattr(param, "opts", None):
            return max(param.opts, key=len)
    return None


def emit_json(payload: Any) -> None:
    """Write ``payload`` as JSON on stdout. A non-finite number is a bug (inputs are checked at the
    boundary so that none arises), reported as such rather than written as ``NaN``/``Infinity``."""
    import json

    try:
        text = json.dumps(payload, indent=2, allow_nan=False)
    except ValueError as exc:
        _bug(exc, as_json=True)
    sys.stdout.write(text + "\n")


def print_all(*renderables: Any) -> None:
    """Print rich renderables (tables, lines of markup) on the console, in order; ``None`` is skipped."""
    for renderable in renderables:
        if renderable is not None:
            if console.width >= PIPED_WIDTH:
                _titles_on_one_line(renderable)
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
        value = value.value if isinstance(value, Enum) else value
        flag = flags.get(field, field)
        raise ClusterSimError(f"{flag}: value {shown(value)}: {rule}", field=flag, value=value) from None


S = TypeVar("S")


def replay_scenario(path: Path, given: list[str], expected: type[S], other_command: str) -> S:
    """The scenario in ``path``, which must be an ``expected`` one (else: run it with ``other_command``);
    the run's options given beside it are refused by name, since the file holds every input."""
    from clustersim.scenario.files import load_scenario

    if given:
        raise ClusterSimError(
            f"--scenario: {', '.join(given)} cannot be combined with a scenario file, which holds every input of "
            f"the run; edit {path} (or run without --scenario)"
        )
    loaded = load_scenario(path)
    if not isinstance(loaded, expected):
        raise ClusterSimError(f"--scenario: {path} is a {loaded.kind} scenario; run it with clustersim {other_command}")
    return loaded
