"""Scenario files: ``save_scenario`` writes TOML (to a temporary file, then renamed, so a failed save
leaves nothing half-written) and ``load_scenario`` reads and validates one, with errors that name the
file, the field, the value and the rule.

Example (what ``clustersim train llama3-70b --nodes 16 --tp 8 --pp 2 --save-scenario job.toml`` writes)::

    kind = "training"
    model = "llama3-70b"

    [system]
    instance = "p5en.48xlarge"
    nodes = 16

    [layout]
    tp = 8
    pp = 2
    dp = 8
    ...

    [job]
    global_batch = 512
    seq_len = 8192
    precision = "bf16"
    tokens = 1000000000000.0
    price = "on_demand"
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import tomli_w
from pydantic import BaseModel, ValidationError

from clustersim.catalog.tomlfiles import read_toml
from clustersim.errors import ClusterSimError, close_matches
from clustersim.files import WriteError, write_whole
from clustersim.records import record_type
from clustersim.scenario.schema import ServingScenario, TrainingScenario

KINDS: dict[str, type[TrainingScenario] | type[ServingScenario]] = {
    "training": TrainingScenario,
    "serving": ServingScenario,
}
# Segments pydantic adds to an error's location for the members of a union (not field names).
_UNION_MEMBER = re.compile(r"^(literal\[.*\]|constrained-\w+|function-\w+\[.*\]|[A-Z]\w*)$")


class ScenarioFileError(ClusterSimError):
    """A scenario file that cannot be read, written, or does not follow the schema."""

    def __init__(self, path: str | Path, problems: Iterable[str]) -> None:
        self.path = str(path)
        self.problems = list(problems)
        first = re.match(r"field '([^']*)'", self.problems[0]) if self.problems else None
        field = f"scenario.{first.group(1)}" if first else "scenario"
        super().__init__(f"scenario {self.path}: {'; '.join(self.problems)}", field=field, value=self.path)


def save_scenario(path: str | Path, scenario: TrainingScenario | ServingScenario, *, header: str = "") -> Path:
    """Write ``scenario`` to ``path`` as TOML (``header``: comment lines on top); returns the path.

    The file is written next to its destination under a temporary name and renamed over it, so an
    interrupted save leaves either the old file or the new one.
    """
    target = Path(path).expanduser()
    data = scenario.model_dump(mode="json", exclude_none=True)
    text = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    text += ("\n" if text else "") + tomli_w.dumps(data)
    try:
        write_whole(target, text, option="--save-scenario")
    except WriteError as exc:
        raise ScenarioFileError(target, [f"cannot write the file: {exc.reason}"]) from None
    return target


def load_scenario(path: str | Path) -> TrainingScenario | ServingScenario:
    """The scenario in the TOML file at ``path``, validated; relative paths in it are taken from the
    file's directory. ``ScenarioFileError`` names the file, the field, the value and the rule."""
    source = Path(path).expanduser()
    data = read_toml(source, what="scenario file")
    kind = data.get("kind")
    model = KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        shown = "missing" if kind is None else f"value {kind!r}"
        raise ScenarioFileError(source, [f"field 'kind': {shown}: must be one of {', '.join(map(repr, KINDS))}"])
    try:
        scenario = model.model_validate(data)
    except ValidationError as exc:
        raise ScenarioFileError(source, problems(model, exc.errors())) from None
    return scenario.relative_to(source.resolve().parent)


def problems(model: type[BaseModel], errors: Iterable[Mapping[str, Any]]) -> list[str]:
    """pydantic's errors as ``field 'a.b': value v: rule``, one per field; the members of a union
    (``layout = "choose"`` or a table) are reported as one problem, or by the deepest field."""
    plain: list[str] = []
    unions: dict[str, list[tuple[list[str], Mapping[str, Any]]]] = {}
    for err in errors:
        loc = [str(p) for p in err["loc"]]
        member = next((i for i, part in enumerate(loc) if _UNION_MEMBER.match(part)), None)
        if member is None:
            plain.append(_problem(model, loc, err))
        else:
            unions.setdefault(".".join(loc[:member]), []).append((loc[member + 1 :], err))
    for field, items in unions.items():
        deeper = [(rest, err) for rest, err in items if rest]
        if deeper:
            plain += [_problem(model, [*field.split("."), *rest], err) for rest, err in deeper]
        else:
            rules = dict.fromkeys(_member_rule(err) for _, err in items)
            plain.append(f"field {field!r}: value {items[0][1].get('input')!r}: {', or '.join(rules)}")
    return plain


def _problem(model: type[BaseModel], loc: list[str], err: Mapping[str, Any]) -> str:
    field = ".".join(loc) or "(whole file)"
    if err["type"] == "extra_forbidden":
        known = list(_fields_at(model, loc[:-1]))
        hint = close_matches(loc[-1], known)
        suggestion = f"; did you mean {', '.join(hint)}?" if hint else ""
        return f"field {field!r}: not a field here{suggestion} (valid: {', '.join(known)})"
    if err["type"] == "missing":
        return f"field {field!r}: missing: required"
    return f"field {field!r}: value {err.get('input')!r}: {_rule(err)}"


def _rule(err: Mapping[str, Any]) -> str:
    return str(err["msg"]).removeprefix("Value error, ")


def _member_rule(err: Mapping[str, Any]) -> str:
    """What one member of a union wants, in words."""
    if err["type"] == "model_type":
        return "should be a table of fields"
    if err["type"] == "literal_error":
        return f"should be {err.get('ctx', {}).get('expected', 'a known value')}"
    return _rule(err)


def _fields_at(model: type[BaseModel], loc: list[str]) -> dict[str, Any]:
    """The fields of the record at ``loc`` inside ``model`` (following nested records and unions)."""
    current: type[BaseModel] | None = model
    for name in loc:
        field = current.model_fields.get(name) if current is not None else None
        current = record_type(field.annotation) if field is not None else None
    return dict(current.model_fields) if current is not None else {}
