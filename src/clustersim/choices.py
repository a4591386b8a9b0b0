"""The enumerated choices of a job's options (activation recompute, serving batching), stdlib only.

The command line offers these as option values, so they live apart from the models that use them
(``clustersim.execution`` re-exports ``Recompute``, ``clustersim.serving.estimate`` ``Batching``)
and importing them loads neither numpy nor pydantic.
"""

from __future__ import annotations

from enum import StrEnum


class Recompute(StrEnum):
    """Activation recompute: none, the attention core only (selective), or whole layers (full)."""

    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"


class Batching(StrEnum):
    """How requests share the engine."""

    CONTINUOUS = "continuous"
    STATIC = "static"
