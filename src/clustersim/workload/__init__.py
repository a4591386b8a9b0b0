"""Workloads: the model (a transformer) and the job it runs."""
