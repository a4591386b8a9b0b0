"""Sweeps: a grid or a list of points over one command's options, run in partitions by a local process pool
or a Ray cluster, each finished partition committed to a SQLite store so that a killed sweep resumes.

This package knows nothing of the commands themselves: ``spec`` reads and expands a spec, ``store`` keeps
the rows, ``execute`` runs partitions through a runner it is given (``clustersim.cli.sweep_point`` runs a
point as the command line would, ``--json``, since the commands' JSON payloads are made in the CLI layer).
"""
