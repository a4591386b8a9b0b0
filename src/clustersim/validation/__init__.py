"""Ground truth against the models: typed cases (``cases``), one adapter per kind (``collective``,
``training``, ``inference``; systems in ``systems``), scoring (``scoring``), the run over files with
its explicit registry of adapters (``run``), and the bundled copy of ``../shared/validation`` (``data/``).

Calibration, auditable: a bounded log-space search (``optimize``), what a fit is (``fit``), the fit
spec of each calibrated kind (``specs``), the manifest and stated priors in the calibration files
(``manifest``), the profile that finds constants the data cannot pin down (``profile``), one
calibration run as the ``benchmarks/calibrate_*.py`` scripts do it (``calibrate``), and
leave-one-source-out cross-validation (``crossval``).

This package sits beside the interfaces and may import every estimator; no estimator imports it.
"""
