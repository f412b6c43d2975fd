"""Delivery: the tuned model compiled, checked, timed and saved as an artifact that loads and runs.

:mod:`~tunewise.delivery.finish` is the chain after tuning: :mod:`~tunewise.delivery.compile` (and its
artifacts, :mod:`~tunewise.delivery.artifact`, :mod:`~tunewise.delivery.signature`) and
:mod:`~tunewise.delivery.timing`.
"""
