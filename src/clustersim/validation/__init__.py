"""Ground truth against the models: typed cases (``cases``), one adapter per kind (``collective``,
``training``, ``inference``; systems in ``systems``), scoring (``scoring``), the run over files with
its explicit registry of adapters (``run``), and the bundled copy of ``../shared/validation`` (``data/``).

This package sits beside the interfaces and may import every estimator; no estimator imports it.
"""
