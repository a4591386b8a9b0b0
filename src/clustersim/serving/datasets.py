"""Request-length datasets as workloads: how long the prompts and outputs of a named request set are.

A published serving result is measured on a request set: MLPerf's OpenOrca subset for Llama 2 70B,
CNN/DailyMail for GPT-J, ShareGPT as vLLM's benchmark samples it, or a load generator's synthetic
requests. The serving model takes mean lengths (``Request``), and a source often names the set rather
than its lengths, so this registry holds each set's input and output length statistics (mean, extremes,
percentiles), every figure with its source, in ``datasets.toml`` beside this module. A user's file
(``CLUSTERSIM_SERVING_DATASETS`` or ``extra`` paths) adds sets or replaces the fields it gives.

Two kinds: a ``dataset`` is a fixed set of requests whose lengths are statistics (a length the sources
do not give stays unknown: whoever uses the set states it); a ``generator`` makes synthetic requests
whose lengths are its parameters (``fixed``: exactly the lengths given; ``random``: vLLM's uniform range
around them, whose mean is the length given).

What the serving model takes of a set: its means, and its lengths at quantiles
(``sim_requests.request_spread``). An engine step's cost is linear in the context it holds (KV reads and cache
capacity scale with the sum of the sequences' lengths, GEMMs with their tokens), so a batch of mixed lengths costs
what a batch at the mean length costs, except for the prefill attention term, which grows with the square of a
prompt (``E[L^2] = mean^2 (1 + cv^2)``). Latency is not linear: the wait behind long prompts and the prompts that
run between a short output's tokens depend on the spread (``clustersim.serving.latency``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from clustersim.catalog.figures import Confidence, CountFigure, Provenance, Record
from clustersim.catalog.overlay import RecordFile
from clustersim.errors import ClusterSimError, UnknownNameError

ENV_VAR = "CLUSTERSIM_SERVING_DATASETS"
PACKAGE, FILE_NAME = "clustersim.serving", "datasets.toml"
Which = Literal["input", "output"]
SIDES: tuple[Which, Which] = ("input", "output")


class DatasetKind(StrEnum):
    """A fixed request set (lengths are statistics) or a load generator (lengths are its parameters)."""

    DATASET = "dataset"
    GENERATOR = "generator"


class Percentiles(Record):
    """Length percentiles in tokens (percent -> tokens), with their source."""

    values: dict[int, float] = Field(min_length=1, description="Percent (1-99) -> length in tokens at it.")
    source: str = Field(min_length=3, description="Citation: the file or table the percentiles come from.")
    provenance: Provenance = Field(Provenance.DERIVED, description="Kind of source.")
    confidence: Confidence = Field(Confidence.VERIFIED, description="How well the figures were checked.")
    note: str | None = Field(None, description="Caveat: how these differ from the set's own figures.")

    @field_validator("values")
    @classmethod
    def _ordered(cls, values: dict[int, float]) -> dict[int, float]:
        if any(not 0 < percent < 100 for percent in values):
            raise ValueError(f"percentiles are keyed by a percent between 1 and 99, got {sorted(values)}")
        ordered = [values[p] for p in sorted(values)]
        if any(v < 0 for v in ordered) or ordered != sorted(ordered):
            raise ValueError("percentile lengths must be non-negative and non-decreasing with the percent")
        return dict(sorted(values.items()))


class LengthStats(Record):
    """One side of a request (its prompt or its output): length statistics in tokens, each sourced."""

    mean: CountFigure | None = Field(None, description="Mean tokens per request (absent: no source gives it).")
    min: CountFigure | None = Field(None, description="Shortest request, tokens.")
    max: CountFigure | None = Field(None, description="Longest request (or the cap the benchmark sets), tokens.")
    percentiles: Percentiles | None = Field(None, description="Length percentiles, tokens.")

    @model_validator(mode="after")
    def _consistent(self) -> LengthStats:
        if self.mean is not None and self.mean.value < 1:
            raise ValueError(f"mean: a mean length is at least 1 token, got {self.mean.value:g}")
        low = self.min.value if self.min is not None else 0.0
        high = self.max.value if self.max is not None else float("inf")
        if low > high:
            raise ValueError(f"min {low:g} is above max {high:g}")
        inside = [("mean", self.mean.value)] if self.mean is not None else []
        if self.percentiles is not None:
            inside += [(f"percentile {p}", v) for p, v in self.percentiles.values.items()]
        for what, value in inside:
            if not low <= value <= high:
                raise ValueError(f"{what} {value:g} is outside [min, max] = [{low:g}, {high:g}]")
        return self

    def figures(self) -> Iterator[tuple[str, CountFigure | Percentiles]]:
        """The figures given, by name."""
        for name in ("mean", "min", "max", "percentiles"):
            figure = getattr(self, name)
            if figure is not None:
                yield name, figure


class RequestDataset(Record):
    """A named request set: what it is, who uses it, and its prompt and output lengths."""

    kind: DatasetKind = Field(description="dataset (a fixed request set) or generator (synthetic requests).")
    description: str = Field(min_length=3, description="What the requests are and how they were selected.")
    used_by: str = Field(min_length=3, description="The benchmarks or load generators that use the set.")
    samples: CountFigure | None = Field(None, description="Requests in the set (datasets).")
    input: LengthStats = Field(default_factory=LengthStats, description="Prompt lengths, tokens.")
    output: LengthStats = Field(default_factory=LengthStats, description="Output (generated) lengths, tokens.")
    range_ratio: CountFigure | None = Field(
        None, description="A generator's spread: lengths uniform in [L (1 - r), L (1 + r)] around L (random)."
    )
    name: str = Field("", description="The set's name (filled in when loaded).")

    @model_validator(mode="after")
    def _kind_fields(self) -> RequestDataset:
        if self.kind is DatasetKind.GENERATOR and self.samples is not None:
            raise ValueError("samples: a generator makes as many requests as asked; give samples for datasets only")
        if self.kind is DatasetKind.DATASET and self.range_ratio is not None:
            raise ValueError("range_ratio: a generator's parameter; a dataset's spread is its percentiles")
        return self

    def mean(self, which: Which) -> float | None:
        """The mean ``input`` or ``output`` length in tokens, None where no source gives it."""
        figure = getattr(self, which).mean
        return None if figure is None else float(figure.value)

    def figures(self) -> Iterator[tuple[str, CountFigure | Percentiles]]:
        """Every figure with its dotted name (``input.mean``, ``samples``, ...)."""
        for name in ("samples", "range_ratio"):
            figure = getattr(self, name)
            if figure is not None:
                yield name, figure
        for side in SIDES:
            for name, figure in getattr(self, side).figures():
                yield f"{side}.{name}", figure


# The file, its environment variable and the user's files over it (clustersim.catalog.overlay).
DATASET_FILE = RecordFile(
    RequestDataset, PACKAGE, FILE_NAME, ENV_VAR, what="request dataset file", entry="dataset", named=True
)


def request_datasets(extra: Sequence[str | Path] = (), *, use_env: bool = True) -> dict[str, RequestDataset]:
    """The packaged request sets with the user's files (``CLUSTERSIM_SERVING_DATASETS``, then ``extra``)
    over them; a malformed file is a ``CatalogFileError`` naming the file, the set, the field and the rule."""
    return DATASET_FILE.records(extra, use_env=use_env)


def request_dataset(name: str, *, field: str = "dataset") -> RequestDataset:
    """The request set ``name``; ``UnknownNameError`` naming ``field``, the value and the known sets."""
    table = request_datasets()
    key = name.strip().lower()
    if key not in table:
        raise UnknownNameError(field, name, table)
    return table[key]


@dataclass(frozen=True)
class RequestLengths:
    """Mean prompt and output lengths of a run, and the request set they come from (None: given directly)."""

    input_tokens: float
    output_tokens: float
    dataset: str | None = None


def resolve_lengths(
    dataset: str | None,
    input_tokens: float | None,
    output_tokens: float | None,
    *,
    defaults: tuple[float, float],
    fields: tuple[str, str] = ("--input", "--output"),
    dataset_field: str = "--dataset",
) -> RequestLengths:
    """The mean lengths of a run given a request set and the lengths stated beside it (None: not stated).

    Without a set, the stated lengths or ``defaults``. A ``dataset`` gives its means, and a length
    stated beside a mean it gives is refused (a length is honoured or refused, never dropped); where
    it gives none, the length must be stated. A ``generator`` takes the stated lengths as its
    parameters, else its own defaults, else ``defaults``. Errors name the field (``fields``) and value.
    """
    if dataset is None:
        return RequestLengths(_or(input_tokens, defaults[0]), _or(output_tokens, defaults[1]))
    found = request_dataset(dataset, field=dataset_field)
    values = []
    for which, stated, default, field in zip(SIDES, (input_tokens, output_tokens), defaults, fields, strict=True):
        mean = found.mean(which)
        if found.kind is DatasetKind.GENERATOR:
            values.append(_or(stated, _or(mean, default)))
        elif mean is not None and stated is not None:
            raise ClusterSimError(
                f"{field}: the dataset {found.name!r} sets the {which} length (mean {mean:g} tokens); "
                f"give {field} or {dataset_field} {found.name}, not both",
                field=field,
                value=stated,
            )
        elif mean is not None:
            values.append(mean)
        elif stated is not None:
            values.append(float(stated))
        else:
            raise ClusterSimError(
                f"{field}: the dataset {found.name!r} has no published mean {which} length; give {field}",
                field=field,
            )
    return RequestLengths(values[0], values[1], found.name)


def _or(value: float | None, default: float) -> float:
    return float(default if value is None else value)
