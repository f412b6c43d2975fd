"""The job behind ``tunewise tune``: putting a run together, running it to its end, and what a command needs.

:mod:`~tunewise.job.workflow` is :func:`tunewise.tune`; :mod:`~tunewise.job.prepare` assembles a run from its
settings; :mod:`~tunewise.job.lease`, :mod:`~tunewise.job.interrupts` and :mod:`~tunewise.job.logs` keep one
owner per run, a clean Ctrl-C and quiet third-party output.
"""
