"""Reliability: failure rates of large runs, checkpoint intervals, goodput and its spread."""
