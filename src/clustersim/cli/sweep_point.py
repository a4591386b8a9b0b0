"""One sweep point run as the command line runs it: ``clustersim COMMAND ... --json`` in this process, its
stdout the row's result and its one-line error (exit code 2 or 3) the row's error.

The sweepable commands are registered here again, on a group of their own, rather than imported from
``cli.app`` (which registers ``sweep``, so importing it would make a cycle).
"""

from __future__ import annotations

import io
import json
import time
from contextlib import redirect_stderr, redirect_stdout
from functools import cache
from typing import Any

import typer
import typer.main
from typer._click import exceptions as click_errors

from clustersim.cli.collective import collective_command
from clustersim.cli.common import LightGroup
from clustersim.cli.fabric import fabric_app
from clustersim.cli.reliability import reliability_command
from clustersim.cli.serve import serve_command
from clustersim.cli.storage import storage_app
from clustersim.cli.train import train_command
from clustersim.cli.transport import transport_app
from clustersim.errors import ClusterSimError, close_matches
from clustersim.sweep.spec import Point, Value, normal_key
from clustersim.sweep.store import Outcome

SWEEPABLE = ("train", "serve", "collective", "fabric", "transport", "storage", "reliability")
OWN_OPTIONS = ("json", "help")  # a sweep gives --json itself


@cache
def _group() -> Any:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None, cls=LightGroup)
    app.command("train")(train_command)
    app.command("serve")(serve_command)
    app.command("collective")(collective_command)
    app.add_typer(fabric_app, name="fabric")
    app.add_typer(transport_app, name="transport")
    app.add_typer(storage_app, name="storage")
    app.command("reliability")(reliability_command)
    return typer.main.get_command(app)


def resolve(command: str) -> Any:
    """The click command a spec's ``command`` names (``collective``, ``fabric compare``), or a one-line error."""
    words = command.split()
    node = _group()
    for depth, word in enumerate(words):
        subcommands = getattr(node, "commands", None)
        if subcommands is None:
            raise ClusterSimError(
                f"command: {' '.join(words[:depth])!r} takes no subcommand (got {command!r})", field="command"
            )
        if word not in subcommands:
            where = " ".join(words[:depth]) or "sweep"
            valid = sorted(subcommands) if depth else list(SWEEPABLE)
            raise ClusterSimError(
                f"command: {where} has no command {word!r} (valid: {', '.join(valid)})", field="command", value=command
            )
        node = subcommands[word]
    if getattr(node, "commands", None) is not None:
        subs = ", ".join(f"{command} {sub}" for sub in sorted(node.commands))
        raise ClusterSimError(
            f"command: {command!r} needs a subcommand (valid: {subs})",
            field="command",
            value=command,
        )
    return node


def keys(command: Any) -> dict[str, Any]:
    """A command's parameters by the key a spec names them with: an argument's name, an option's long name."""
    out: dict[str, Any] = {}
    for param in command.params:
        if param.param_type_name == "argument":
            out[normal_key(param.name)] = param
            continue
        for opt in param.opts:
            if opt.startswith("--") and opt[2:] not in OWN_OPTIONS:
                out[opt[2:]] = param
    return out


def argv(command: str, inputs: dict[str, Value]) -> list[str]:
    """The command line (after ``clustersim``) that runs a point with ``--json``."""
    leaf = resolve(command)
    params = keys(leaf)
    options: list[str] = []
    arguments: dict[int, list[str]] = {}
    for key, value in inputs.items():
        param = params[key]
        flag = max(param.opts, key=len)
        values = value if isinstance(value, list) else [value]
        if param.param_type_name == "argument":
            arguments[leaf.params.index(param)] = [_text(v) for v in values]
        elif param.is_flag:
            if value is True:
                options.append(flag)
            elif value is False and param.secondary_opts:
                options.append(max(param.secondary_opts, key=len))
        else:
            for item in values:
                options += [flag, _text(item)]
    positional = [word for index in sorted(arguments) for word in arguments[index]]
    return [*command.split(), *options, "--json", *(["--", *positional] if positional else [])]


def check(command: str, spec_keys: list[str], points: list[Point]) -> None:
    """Refuse, before anything runs, a key the command does not take and a value its options refuse."""
    leaf = resolve(command)
    params = keys(leaf)
    for key in spec_keys:
        if key in OWN_OPTIONS:
            raise ClusterSimError(f"sweep spec: {key!r} is not set in a spec: a sweep gives --{key} itself", field=key)
        if key not in params:
            near = close_matches(key, params)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ClusterSimError(
                f"sweep spec: {key!r} is not an option of {command}{hint}; valid: {', '.join(params)}",
                field=key,
                value=key,
            )
        param = params[key]
        multiple = param.nargs != 1 or getattr(param, "multiple", False)
        for point in points:
            value = point.inputs.get(key)
            if isinstance(value, list) and not multiple:
                raise ClusterSimError(f"sweep spec: {key} = {value!r}: --{key} takes one value", field=key, value=value)
            if getattr(param, "is_flag", False) and value is not None and not isinstance(value, bool):
                raise ClusterSimError(
                    f"sweep spec: {key} = {value!r}: --{key} is a flag; give true or false", field=key, value=value
                )
    for point in points:
        words = argv(command, point.inputs)[len(command.split()) :]
        try:
            leaf.make_context(command.split()[-1], words, resilient_parsing=False)
        except click_errors.ClickException as exc:
            message, named = _refusal(exc, params, point)
            raise ClusterSimError(message, field=named, value=point.inputs.get(named or "")) from None


def _refusal(exc: click_errors.ClickException, params: dict[str, Any], point: Point) -> tuple[str, str | None]:
    """The one-line refusal of a point the command line would refuse, and the spec key it names."""
    param = getattr(exc, "param", None)
    key = next((k for k, p in params.items() if p is param), None)
    message = exc.format_message().replace("Value error, ", "")
    if key is not None and key not in point.inputs:
        return f"sweep spec: {key!r} is required by the command; set it under [options], [grid] or [[points]]", key
    if key is None:
        return f"sweep spec, point {point.seq + 1}: {message}", None
    return f"sweep spec: {key} = {point.inputs[key]!r} (point {point.seq + 1}): {message}", key


def run_partition(command: str, items: list[tuple[str, dict[str, Value]]]) -> list[Outcome]:
    """Run each point of a partition (the sweep executors' runner)."""
    return [run_point(command, pid, inputs) for pid, inputs in items]


def run_point(command: str, pid: str, inputs: dict[str, Value]) -> Outcome:
    """Run one point; a refusal or a failure is the row's error (the command's own JSON error line)."""
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    code: int = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            _group().main(args=argv(command, inputs), prog_name="clustersim", standalone_mode=True)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception as exc:  # a bug that escaped the command's own handling
            err.write(json.dumps({"error": f"internal error: {type(exc).__name__}: {exc}"}) + "\n")
            code = 3
    wall_s = time.perf_counter() - start
    if code == 0:
        try:
            result = json.loads(out.getvalue())
        except ValueError:
            return Outcome(pid, None, _error({"error": "internal error: the command printed no JSON"}, 3), wall_s)
        return Outcome(pid, json.dumps(result, separators=(",", ":")), None, wall_s)
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    last = lines[-1] if lines else f"exit code {code}"
    try:
        error = json.loads(last)
    except ValueError:
        error = {"error": last.removeprefix("error: ")}
    return Outcome(pid, None, _error(error if isinstance(error, dict) else {"error": last}, code), wall_s)


def _error(error: dict[str, Any], code: int) -> str:
    return json.dumps({**error, "exit_code": code}, separators=(",", ":"))


def _text(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)
