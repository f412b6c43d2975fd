"""Tuning: the loop that proposes, measures and records, and the rules it follows.

:mod:`~tunewise.tuning.session` is the loop; :mod:`~tunewise.tuning.ledger` its TVM-free rules over frozen
:mod:`~tunewise.tuning.state`; :mod:`~tunewise.tuning.search` a task's MetaSchedule search;
:mod:`~tunewise.tuning.measure` and :mod:`~tunewise.tuning.workers` build and run candidates;
:mod:`~tunewise.tuning.model_checks` times the whole model while it is tuned.
"""
