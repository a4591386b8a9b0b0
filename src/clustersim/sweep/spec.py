"""A sweep spec (TOML): the command, constant ``[options]``, a ``[grid]`` of values and/or ``[[points]]``.

``expand`` gives the points in a fixed order: the grid's product with the keys in the order the spec
writes them (the last varies fastest), each grid point crossed with every ``[[points]]`` entry in turn.
A point's id is a hash of the command and its inputs, so a store knows which points finished.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clustersim.errors import ClusterSimError, shown

MAX_POINTS = 1_000_000
SECTIONS = ("command", "options", "grid", "points")

Value = str | int | float | bool | list[str | int | float | bool]


@dataclass(frozen=True)
class Point:
    """One point of a sweep: its place in the spec's order, its id and the command's inputs."""

    seq: int
    id: str
    inputs: dict[str, Value]


@dataclass(frozen=True)
class SweepSpec:
    """A parsed spec; ``text`` is the TOML it came from (kept in the store)."""

    command: str
    options: dict[str, Value] = field(default_factory=dict)
    grid: dict[str, list[Value]] = field(default_factory=dict)
    points: list[dict[str, Value]] = field(default_factory=list)
    text: str = ""

    def canonical(self) -> dict[str, Any]:
        """What makes two specs the same sweep (the text's layout and comments do not)."""
        return {"command": self.command, "options": self.options, "grid": self.grid, "points": self.points}

    def count(self) -> int:
        """How many points the spec makes."""
        return math.prod(len(values) for values in self.grid.values()) * max(len(self.points), 1)

    def keys(self) -> list[str]:
        """Every input key the spec sets, in the spec's order."""
        keys = [*self.options, *self.grid]
        for entry in self.points:
            keys += [key for key in entry if key not in keys]
        return keys

    def expand(self) -> list[Point]:
        """Every point in order, each with its id; a point made twice is refused."""
        names = list(self.grid)
        entries = self.points or [{}]
        out: list[Point] = []
        seen: dict[str, int] = {}
        for combo in itertools.product(*(self.grid[name] for name in names)):
            for entry in entries:
                inputs = {**self.options, **dict(zip(names, combo, strict=True)), **entry}
                pid = point_id(self.command, inputs)
                if pid in seen:
                    raise ClusterSimError(
                        f"sweep spec: points {seen[pid] + 1} and {len(out) + 1} have the same inputs "
                        f"({_inputs_text(inputs)}); each point must differ",
                        field="points",
                    )
                seen[pid] = len(out)
                out.append(Point(len(out), pid, inputs))
        return out


def point_id(command: str, inputs: dict[str, Value]) -> str:
    """A stable id for a point: a hash of the command and its inputs (key order does not count)."""
    text = json.dumps({"command": command, "inputs": inputs}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_spec(path: Path) -> SweepSpec:
    """Read a spec file; a missing file or bad TOML is refused naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ClusterSimError(
            f"SPEC: cannot read {path}: {exc.strerror or exc}", field="SPEC", value=str(path)
        ) from None
    return parse_spec(text, str(path))


def parse_spec(text: str, source: str = "spec") -> SweepSpec:
    """Parse and check a spec's structure (which keys the command takes is checked by the caller)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ClusterSimError(f"{source}: not valid TOML: {exc}", field="SPEC", value=source) from None
    unknown = [key for key in data if key not in SECTIONS]
    if unknown:
        raise ClusterSimError(
            f"{source}: unknown top-level key {unknown[0]!r} (valid: {', '.join(SECTIONS)})", field=unknown[0]
        )
    command = data.get("command")
    if not isinstance(command, str) or not command.split():
        raise ClusterSimError(
            f"{source}: 'command' must name the command to sweep, e.g. command = \"collective\" or "
            f'command = "fabric compare" (got {shown(command)})',
            field="command",
            value=command,
        )
    options = _table(data.get("options", {}), "options", source)
    grid_table = data.get("grid", {})
    if not isinstance(grid_table, dict):
        raise ClusterSimError(f"{source}: [grid] must be a table of option = [values]", field="grid")
    grid: dict[str, list[Value]] = {}
    for key, values in grid_table.items():
        if not isinstance(values, list) or not values:
            raise ClusterSimError(
                f"{source}: grid.{key} must be a non-empty list of the values to take (got {shown(values)})",
                field=f"grid.{key}",
                value=str(values),
            )
        if normal_key(key) in grid:
            raise ClusterSimError(f"{source}: grid sets {normal_key(key)!r} twice (as {key!r})", field=f"grid.{key}")
        grid[normal_key(key)] = [_value(item, f"grid.{key}", source, allow_list=True) for item in values]
    raw_points = data.get("points", [])
    if not isinstance(raw_points, list) or not all(isinstance(p, dict) for p in raw_points):
        raise ClusterSimError(f"{source}: 'points' must be a list of tables, written [[points]]", field="points")
    points = [_table(entry, f"points[{i}]", source) for i, entry in enumerate(raw_points)]
    _refuse_overlaps(options, grid, points, source)
    spec = SweepSpec(" ".join(command.split()), options, grid, points, text)
    if not grid and not points:
        raise ClusterSimError(f"{source}: nothing to sweep: give a [grid] or [[points]]", field="grid")
    if spec.count() > MAX_POINTS:
        raise ClusterSimError(
            f"{source}: the spec makes {spec.count():,} points (at most {MAX_POINTS:,}); split it", field="grid"
        )
    return spec


def differences(stored: SweepSpec, given: SweepSpec) -> list[str]:
    """How ``given`` differs from the ``stored`` spec, one phrase per difference (empty: the same sweep)."""
    out = []
    if stored.command != given.command:
        out.append(f"command: store has {stored.command!r}, spec has {given.command!r}")
    for section in ("options", "grid"):
        old, new = getattr(stored, section), getattr(given, section)
        for key in dict.fromkeys([*old, *new]):
            if old.get(key) != new.get(key):
                out.append(f"{section}.{key}: store has {_or_unset(old, key)}, spec has {_or_unset(new, key)}")
    if stored.points != given.points:
        if len(stored.points) != len(given.points):
            out.append(f"points: store has {len(stored.points)} entries, spec has {len(given.points)}")
        else:
            i = next(i for i, (a, b) in enumerate(zip(stored.points, given.points, strict=True)) if a != b)
            out.append(f"points[{i}]: store has {stored.points[i]}, spec has {given.points[i]}")
    if not out and list(stored.grid) != list(given.grid):
        out.append(f"grid order: store has {list(stored.grid)}, spec has {list(given.grid)}")
    return out


def normal_key(key: str) -> str:
    """An option's key as specs write it: the long name without dashes, ``_`` read as ``-``."""
    return key.strip().lstrip("-").replace("_", "-").lower()


def _or_unset(table: dict[str, Any], key: str) -> str:
    return repr(table[key]) if key in table else "it unset"


def _table(raw: object, where: str, source: str) -> dict[str, Value]:
    if not isinstance(raw, dict):
        raise ClusterSimError(f"{source}: [{where}] must be a table of option = value", field=where)
    out: dict[str, Value] = {}
    for key, value in raw.items():
        name = normal_key(key)
        if name in out:
            raise ClusterSimError(f"{source}: {where} sets {name!r} twice (as {key!r})", field=f"{where}.{key}")
        out[name] = _value(value, f"{where}.{key}", source, allow_list=True)
    return out


def _value(value: object, where: str, source: str, *, allow_list: bool) -> Value:
    if isinstance(value, bool | int | str) or (isinstance(value, float) and math.isfinite(value)):
        return value
    if allow_list and isinstance(value, list) and value:
        items: list[str | int | float | bool] = []
        for item in value:
            scalar = _value(item, where, source, allow_list=False)
            assert not isinstance(scalar, list)
            items.append(scalar)
        return items
    raise ClusterSimError(
        f"{source}: {where} = {shown(value)}: a value must be a string, an integer, a finite number or a boolean "
        f"(a list of them for an option given more than once)",
        field=where,
        value=str(value),
    )


def _refuse_overlaps(
    options: dict[str, Value], grid: dict[str, list[Value]], points: list[dict[str, Value]], source: str
) -> None:
    for key in grid:
        if key in options:
            raise ClusterSimError(f"{source}: {key!r} is both in [options] and [grid]; keep one", field=key)
    for i, entry in enumerate(points):
        for key in entry:
            if key in options or key in grid:
                where = "[options]" if key in options else "[grid]"
                raise ClusterSimError(f"{source}: points[{i}] sets {key!r}, which {where} sets too", field=key)


def _inputs_text(inputs: dict[str, Value]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in inputs.items())
