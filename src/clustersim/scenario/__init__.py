"""Scenario files: every input of one training or serving run, saved to TOML and replayed.

``clustersim train --save-scenario job.toml`` writes the inputs a run used (a chosen layout filled
in); ``clustersim train --scenario job.toml`` runs them again. In Python: ``load_scenario``,
``save_scenario`` (``clustersim.scenario.files``), the records (``clustersim.scenario.schema``) and
``run_training`` (``clustersim.scenario.training``).
"""
