"""Compute: per-operation roofline with calibrated efficiencies, and memory accounting."""
