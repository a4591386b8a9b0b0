"""The request rates of a sweep (``serve --rates``), from one short text.

* ``A:B``: powers of two from ``A`` (``A``, ``2A``, ``4A``, ...) up to ``B``, with ``B`` itself last where
  the doubling does not land on it (``1:64``: 1, 2, 4, ..., 64; ``1:50``: 1, 2, ..., 32, 50), the grid
  load generators sweep (vLLM's ``benchmark_serving --request-rate`` runs are usually doubled);
* ``A:B:STEP``: ``A``, ``A + STEP``, ... up to ``B`` (``B`` included where the steps land on it);
* ``R1,R2,...``: those rates, in increasing order.

Rates are requests/s for the whole deployment, positive and at most ``MAX_RATE_PER_S``; a sweep has at
most ``MAX_RATES`` of them.
"""

from __future__ import annotations

import math

from clustersim.errors import ClusterSimError
from clustersim.units import MAX_RATE_PER_S

MAX_RATES = 64
FORMS = "A:B (doubling from A to B), A:B:STEP (A, A+STEP, ... B) or R1,R2,... in requests/s, e.g. 1:64"


def parse_rates(text: str, field: str = "--rates") -> list[float]:
    """The rates ``text`` names (see the module); a bad text is one ``ClusterSimError`` naming ``field``."""

    def bad(why: str) -> ClusterSimError:
        return ClusterSimError(f"{field}: {text!r} {why}; use {FORMS}", field=field, value=text)

    def rate(part: str) -> float:
        try:
            value = float(part)
        except ValueError:
            raise bad(f"has {part.strip()!r}, not a number") from None
        if not (value > 0 and math.isfinite(value)) or value > MAX_RATE_PER_S:
            raise bad(f"has {part.strip()!r}: a rate is positive requests/s up to {MAX_RATE_PER_S:g}")
        return value

    if "," in text:
        rates = sorted({rate(part) for part in text.split(",") if part.strip()})
    else:
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise bad("is not a range or a list")
        low, high = rate(parts[0]), rate(parts[1])
        if high < low:
            raise bad(f"runs from {low:g} down to {high:g}")
        if len(parts) == 3:
            step = rate(parts[2])
            count = math.floor((high - low) / step * (1 + 1e-12)) + 1
            if count > MAX_RATES:
                raise bad(f"names {count} rates, more than {MAX_RATES}")
            rates = [low + k * step for k in range(count)]
        else:
            rates = [low]
            while rates[-1] * 2 <= high * (1 + 1e-12):
                rates.append(rates[-1] * 2)
            if rates[-1] < high * (1 - 1e-12):
                rates.append(high)
    if not rates:
        raise bad("names no rate")
    if len(rates) > MAX_RATES:
        raise bad(f"names {len(rates)} rates, more than {MAX_RATES}")
    return rates
