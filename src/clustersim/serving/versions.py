"""Release numbers and months in a free-text ``software.version`` (an engine profile's ``releases`` and
``released`` ranges are matched against them)."""

from __future__ import annotations

import re

RELEASE = re.compile(r"\d+(?:\.\d+){1,2}")
MONTH = re.compile(r"20\d\d-(?:0[1-9]|1[0-2])")


def release_number(text: str) -> tuple[int, ...]:
    """``'0.7.1'`` as ``(0, 7, 1)``; shorter numbers pad with zeros, so ``0.8`` = ``0.8.0``."""
    parts = tuple(int(part) for part in text.split("."))
    return parts + (0,) * (3 - len(parts))


def parse_version(framework: str, version: str) -> tuple[tuple[int, ...] | None, str | None]:
    """(the framework's release number, the month) a free-text ``software.version`` names, each None
    where it names none: a release is a number after the framework's name (``TensorRT-LLM v0.7.1``) or
    the whole text (``0.9.2``); a month is ``YYYY-MM``."""
    text = version.strip().lower()
    whole = re.fullmatch(r"v?(" + RELEASE.pattern + ")", text)
    named = re.search(re.escape(framework) + r"\s*v?(" + RELEASE.pattern + r")\b", text)
    found = whole or named
    month = MONTH.search(text)
    return (release_number(found.group(1)) if found else None), (month.group(0) if month else None)
