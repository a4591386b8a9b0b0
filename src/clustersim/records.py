"""What the typed records (pydantic models) of the files clustersim reads share."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel


def record_type(annotation: Any) -> type[BaseModel] | None:
    """The record a field's annotation holds, through Optional, unions and Annotated (not inside containers: a
    ``dict[str, Record]`` field's keys are names, not fields); None for a plain value."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, typing.Annotated):
        for arg in typing.get_args(annotation):
            found = record_type(arg)
            if found is not None:
                return found
    return None
