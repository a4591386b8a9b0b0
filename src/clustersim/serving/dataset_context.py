"""A request set against the model's context: its longest request, refused or noted."""

from __future__ import annotations

import math

from clustersim.serving.datasets import request_dataset
from clustersim.serving.estimate import Request
from clustersim.workload.transformer import Transformer


def dataset_context_notes(model: Transformer, dataset: str | None, request: Request) -> tuple[str, ...]:
    """A request set whose longest prompt + longest output (its stated maxima, else the request's means, x (1 +
    range_ratio) for a generator that draws around them) is beyond the model's context: refused unless
    ``request.beyond_context``, then the note saying so."""
    if dataset is None:
        return ()
    stats = request_dataset(dataset)
    spread = 1.0 + (stats.range_ratio.value if stats.range_ratio is not None else 0.0)  # a generator's widest draw
    longest_in = stats.input.max.value if stats.input.max is not None else math.ceil(request.input_tokens * spread)
    longest_out = stats.output.max.value if stats.output.max is not None else math.ceil(request.output_tokens * spread)
    what = f"dataset (--dataset) {stats.name}'s longest request, {longest_in:,.0f} + {longest_out:,.0f},"
    note = model.check_context(longest_in + longest_out, what, beyond_context=request.beyond_context)
    return () if note is None else (note,)
