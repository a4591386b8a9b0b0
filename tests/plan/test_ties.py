"""Two planned rows whose objectives agree to within 0.01% tie: neither is said to win by a term."""

from __future__ import annotations

from clustersim.plan.ties import TIE_SHARE, tie_words, ties


def test_objectives_within_a_hundredth_of_a_percent_tie():
    assert ties(100.0, 100.0 + 0.9 * TIE_SHARE * 100.0)
    assert ties(100.0 + TIE_SHARE * 100.0, 100.0)  # at the edge, either order
    assert not ties(100.0, 100.0 + 1.1 * TIE_SHARE * 100.0)
    assert ties(0.0, 0.0) and not ties(0.0, 1e-12)


def test_a_tie_says_so_with_its_tolerance():
    assert tie_words("cost") == "ties the runner-up on cost (within 0.01%)"
