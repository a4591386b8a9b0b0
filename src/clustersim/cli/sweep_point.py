"""One sweep point run as the command line runs it: ``clustersim COMMAND ... --json`` in this process, its
stdout the row's result and its one-line error (exit code 2 or 3) the row's error.

The sweepable commands are registered here again, on a group of their own, rather than imported from
``cli.app`` (which registers ``sweep``, so importing it would make a cycle).
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
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
from clustersim.sweep.spec import SweepSpec, Value, normal_key
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


def check(spec: SweepSpec) -> None:
    """Refuse, before anything runs, a key the command does not take and a value its options refuse.

    The command line parses each option on its own, so each value is parsed once, in the spec's first point
    with that value put in (and each [[points]] entry once): a grid of a million points costs what its
    lists cost."""
    leaf = resolve(spec.command)
    params = keys(leaf)
    values: dict[str, list[Value]] = {}
    for _where, probe in _probes(spec):
        for key, value in probe.items():
            values.setdefault(key, []).append(value)
    for key, taken in values.items():
        _check_key(spec.command, key, taken, params)
    name = spec.command.split()[-1]
    for where, probe in _probes(spec):
        try:
            leaf.make_context(name, argv(spec.command, probe)[len(spec.command.split()) :], resilient_parsing=False)
        except click_errors.ClickException as exc:
            message, named = _refusal(exc, params, probe, where)
            raise ClusterSimError(message, field=named, value=probe.get(named or "")) from None


def _probes(spec: SweepSpec) -> Iterator[tuple[str, dict[str, Value]]]:
    """The spec's first point, then it with each other grid value put in, then with each [[points]] entry."""
    base = {**spec.options, **{key: values[0] for key, values in spec.grid.items()}}
    first = spec.points[0] if spec.points else {}
    yield "", {**base, **first}
    for key, values in spec.grid.items():
        for value in values[1:]:
            yield "", {**base, **first, key: value}
    for index, entry in enumerate(spec.points[1:], start=1):
        yield f"points[{index}]", {**base, **entry}


def _check_key(command: str, key: str, taken: list[Value], params: dict[str, Any]) -> None:
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
    for value in taken:
        if isinstance(value, list) and not multiple:
            raise ClusterSimError(f"sweep spec: {key} = {value!r}: --{key} takes one value", field=key, value=value)
        if getattr(param, "is_flag", False) and not isinstance(value, bool):
            raise ClusterSimError(
                f"sweep spec: {key} = {value!r}: --{key} is a flag; give true or false", field=key, value=value
            )


def _refusal(
    exc: click_errors.ClickException, params: dict[str, Any], probe: dict[str, Value], where: str
) -> tuple[str, str | None]:
    """The one-line refusal of a point the command line would refuse, and the spec key it names."""
    param = getattr(exc, "param", None)
    key = next((k for k, p in params.items() if p is param), None)
    message = exc.format_message().replace("Value error, ", "")
    at = f" ({where})" if where else ""
    if key is not None and key not in probe:
        return f"sweep spec: {key!r} is required by the command; set it under [options], [grid] or [[points]]", key
    if key is None:
        return f"sweep spec{at}: {message}", None
    return f"sweep spec: {key} = {probe[key]!r}{at}: {message}", key


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
