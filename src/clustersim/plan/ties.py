"""When two planned rows tie: objectives closer than ``TIE_SHARE`` of the larger, far inside any estimate's
interval. Where two rows differ only in the last digits, a "reason" one wins would name a term shown equal on
both sides ("less optimizer step: 14.19 h against 14.19 h" at a margin of 1e-8: two Llama 3 70B layouts on eight
p5en)."""

from __future__ import annotations

TIE_SHARE = 1e-4


def ties(ours: float, theirs: float) -> bool:
    """Whether two objectives tie: within ``TIE_SHARE`` of the larger."""
    return abs(theirs - ours) <= TIE_SHARE * max(abs(ours), abs(theirs))


def tie_words(objective: str) -> str:
    """How a row that ties its runner-up says so."""
    return f"ties the runner-up on {objective} (within {100 * TIE_SHARE:g}%)"
