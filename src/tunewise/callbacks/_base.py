"""The callback contract: what a tuning run tells the code that watches it."""

from __future__ import annotations


class Callback:
    """Told what a tuning run does; every method does nothing here, and a callback overrides those it needs.

    Contract:

    - :meth:`slot_recorded` is called once for every slot that measured trials, after the slot's trials and
      checkpoint are committed to the store, in slot order; :meth:`slot_phase` when the slot in flight enters
      a phase; :meth:`model_measured` after each whole-model check (:mod:`tunewise.tuning.model_checks`) is stored. They
      come from :class:`~tunewise.tuning.session.Session` (``callbacks=[...]``).
    - :meth:`phase`, :meth:`tuning_started` and :meth:`tuning_finished` come from the job around the session:
      :func:`tunewise.tune` and :func:`tunewise.resume` send all three, :func:`tunewise.job.prepare.prepare_run`
      sends :meth:`phase` for the steps it takes; a session driven alone sends none of them.
    - Every call is made in the tuning thread, which waits for it: a callback is quick (a live display
      redraws on its own thread). The snapshots it gets are frozen (:class:`~tunewise.tuning.state.Snapshot`); it
      acts on nothing the run owns. An exception it raises ends the run like any other (the run is left
      ``failed``, or ``interrupted`` for a ``KeyboardInterrupt``); the slots recorded before stay in the store.
    """

    def phase(self, text: str) -> None:
        """A step of the job started (importing, extracting, tuning, compiling...), described by ``text``."""

    def tuning_started(self, model, budget) -> None:
        """Tasks of ``model`` (:class:`~tunewise.lowering.tasks.ExtractedModel`) are extracted, their default latencies
        measured unless ``model.defaults_measured`` is false (then the session measures them after its first
        slot); slots follow, under ``budget`` (:class:`~tunewise.budget.Budget`; its time limit is the tuning
        time left)."""

    def slot_phase(self, snapshot, task: int, phase: str) -> None:
        """The slot in flight, of task ``task``, entered ``phase`` (``search``, ``build``, ``measure``, and for
        a new run's first slot ``default latencies``: its candidates are measured, every task's default
        latency is being measured); ``snapshot`` is the run before the slot."""

    def slot_recorded(self, event, snapshot) -> None:
        """A slot was measured and recorded: ``event`` (:class:`~tunewise.callbacks.SlotEvent`) says what it did,
        ``snapshot`` is the run after it."""

    def model_measured(self, point, snapshot) -> None:
        """The whole model was compiled with the best records so far and timed: ``point``
        (:class:`~tunewise.stores.ModelLatency`) says when and what it measured, ``snapshot`` is the run then."""

    def tuning_finished(self) -> None:
        """The tuning loop ended (its budget spent, or every task finished)."""
