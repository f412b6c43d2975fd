"""Stop once the model is fast enough."""

from __future__ import annotations

from tunewise.stoppers._base import StopRule, milliseconds, model_latency, positive
from tunewise.tuning.state import Cost, Snapshot


class LatencyGoal(StopRule):
    """End the run once the model latency is at most ``latency`` seconds: Trimmer's goal *g* (Borowiec et al.,
    IEEE CLOUD 2022, s. IV-C).

    The model latency is the latest one the driver measured (``snapshot.measured``), else the snapshot's
    estimate (the weighted sum of the tasks' best latencies). With ``measured_only`` the estimate never ends
    the run: only a measured latency counts.

    >>> from tunewise.tuning.state import Cost, Snapshot, TaskView
    >>> tasks = (TaskView(0, "conv", 2, 1e9, 8e-3, best_history=(5e-3,)),)
    >>> LatencyGoal(latency=0.012).check(Snapshot(tasks), Cost())
    'latency goal 12 ms reached: estimated model latency 10 ms'
    >>> LatencyGoal(latency=0.012, measured_only=True).check(Snapshot(tasks), Cost()) is None
    True
    """

    def __init__(self, *, latency: float, measured_only: bool = False):
        positive("latency", latency)
        self.latency = latency
        self.measured_only = measured_only

    def check(self, snapshot: Snapshot, cost: Cost) -> str | None:
        latency, source = model_latency(snapshot)
        if (self.measured_only and source != "measured") or not latency <= self.latency:
            return None
        return f"latency goal {milliseconds(self.latency)} reached: {source} model latency {milliseconds(latency)}"
