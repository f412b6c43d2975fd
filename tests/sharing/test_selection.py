"""Selective tuning without TVM: cliques and representatives, the members' rules, and the ledger's transfer slots."""

import math

import pytest

from tunewise import sharing
from tunewise.lowering.tasks import Task
from tunewise.tuning.ledger import Budget, Ledger
from tunewise.tuning.state import TaskView


def test_tasks_join_the_heaviest_clique_and_the_representative_weighs_similarity_by_latency():
    # 0-1-2 a triangle, 2-3 an edge, 4 alone; 5 is similar to 4 only below the threshold
    m = [[1, .5, .4, 0, 0, 0], [.5, 1, .3, 0, 0, 0], [.4, .3, 1, .9, 0, 0], [0, 0, .9, 1, 0, 0],
         [0, 0, 0, 0, 1, .005], [0, 0, 0, 0, .005, 1]]
    selection = sharing.select(m, [1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    # the triangle weighs 1.2, the edge 2-3 0.9: task 2 joins the triangle, task 3 is left alone
    assert selection.group == (0, 0, 0, 3, 4, 5)
    assert selection.source == (None, 0, 0, None, None, None)  # 0 has the largest similarity sum (0.9)
    heavy = sharing.select(m, [1.0, 1.0, 10.0, 1.0, 1.0, 1.0])  # task 2's latency share outweighs it
    assert heavy.source == (2, 2, None, None, None, None) and heavy.representative(0) == 2


def test_latency_shares_fall_back_to_flops_while_a_default_latency_is_unknown():
    tasks = [Task("a", "1", 2, 10.0, 1e-3), Task("b", "2", 1, 40.0, 3e-3)]
    assert sharing.latency_shares(tasks) == [2e-3, 3e-3]
    assert sharing.latency_shares([tasks[0], Task("b", "2", 1, 40.0, math.inf)]) == [20.0, 40.0]


def _view(k, best=(), default=1.0, flops=1e6, finished=False):
    return TaskView(k, f"t{k}", 1, flops, default, tuple(best), tuple(range(1, len(best) + 1)), len(best), 0,
                    finished)


def test_a_member_is_due_when_its_representative_improves_and_is_judged_once_the_representative_settles():
    members = sharing.Members([None, 0, 0, 0], [0.4, 0.2, 0.2, 0.2], settled=2)
    assert members.due([_view(0), _view(1), _view(2), _view(3)]) is None  # nothing to give yet
    early = _view(0, [0.2])  # one trial of two: an early schedule, 5 MFLOP/s
    assert members.due([early, _view(1), _view(2), _view(3)]) == 1
    members.transfer_measured(_view(1, [2.0]), early, [2.0])  # slower than its default latency, but not judged yet
    assert not members.fallen and members.due([early, _view(1, [2.0]), _view(2), _view(3)]) == 2
    rep = _view(0, [0.2, 0.2])  # settled, still at 0.2: member 1 holds its best and is judged now
    members.searched([rep, _view(1, [2.0]), _view(2), _view(3)], 0)
    assert members.fallen == {1} and members.source(1) is None
    members.transfer_measured(_view(2, [0.24]), rep, [0.24])  # 4.2 MFLOP/s: above 0.8 of the representative's 5, kept
    members.transfer_measured(_view(3, [0.26]), rep, [0.26])  # 3.8 MFLOP/s: short of 0.8 of the group's 5
    assert members.fallen == {1, 3} and members.source(2) == 0
    better = _view(0, [0.2, 0.2, 0.1])  # 10 MFLOP/s
    assert members.due([better, _view(1, [2.0]), _view(2, [0.24]), _view(3, [0.26])]) == 2
    members.transfer_measured(_view(2, [0.24, 0.24]), better, [math.inf])  # its new schedule failed: 4.2 against 10
    assert members.fallen == {1, 2, 3}


def test_every_transfer_failing_or_a_representative_without_a_schedule_makes_members_fall_back():
    members = sharing.Members([None, 0, 0], [0.4, 0.3, 0.3], settled=2)
    rep = _view(0, [0.2, 0.2])
    members.transfer_measured(_view(1, [math.inf]), rep, [math.inf])  # every transferred schedule failed
    assert members.fallen == {1}
    empty = sharing.Members([None, 0], [0.5, 0.5], settled=2)
    empty.searched([_view(0, [math.inf]), _view(1)], 0)  # one trial: not settled
    assert not empty.fallen
    empty.searched([_view(0, [math.inf, math.inf]), _view(1)], 0)  # settled with nothing to give
    assert empty.fallen == {1}


def test_the_shortfall_compares_throughputs_and_spares_members_too_small_to_repay_a_search():
    # a representative of 8 MFLOP at 8 ms (1 GFLOP/s); members of other sizes at 0.5 GFLOP/s but 10-100x
    # faster than their default latencies, as fast as the representative is over its own
    members = sharing.Members([None, 0, 0, 0], sharing.flop_shares(
        [Task(f"t{k}", str(k), 1, flops, 1.0) for k, flops in enumerate([8e6, 2e6, 5e4, 0.0])]))
    rep = _view(0, [8e-3], flops=8e6, finished=True)
    members.transfer_measured(_view(1, [4e-3], flops=2e6), rep, [4e-3])  # a fifth of the model's FLOPs: searched
    members.transfer_measured(_view(2, [1e-4], flops=5e4), rep, [1e-4])  # 0.5 % of the model's FLOPs: held
    members.transfer_measured(_view(3, [1e-5], flops=0.0), rep, [1e-5])  # no FLOPs, no throughput to compare: held
    assert members.fallen == {1} and members.source(2) == members.source(3) == 0
    assert sharing.flop_shares([Task("a", "1", 3, 1e6, 1.0), Task("b", "2", 1, 1e6, 1.0)]) == [0.75, 0.25]
    assert sharing.flop_shares([Task("a", "1", 1, 0.0, 1.0)]) == [0.0]


class _Order:
    """Chooses the live tasks in index order; counts the decisions."""

    def __init__(self):
        self.asked = 0

    def next(self, snapshot):
        self.asked += 1
        return snapshot.live[0].index if snapshot.live else None


def _tasks(n):
    return [Task(f"t{k}", str(k), 1, 1e6, 1.0) for k in range(n)]


def test_the_ledger_hands_held_members_transfer_slots_and_searches_them_only_after_a_fall_back():
    scheduler = _Order()
    ledger = Ledger(_tasks(3), scheduler, Budget(max_trials=100), trials_per_slot=4, clock=lambda: 0.0)
    ledger.set_members(sharing.Members([None, 0, 0], [1 / 3] * 3, top=2))
    assert [t.index for t in ledger.snapshot().live] == [0] and ledger.snapshot().tasks[1].source == 0
    first = ledger.ask()
    assert (first.task, first.n, first.source) == (0, 4, None)
    ledger.tell(first, [0.5, 0.4, 0.6, 0.5])
    transfer = ledger.ask()  # the representative has a best: member 1 is given it, the scheduler is not asked
    assert (transfer.task, transfer.n, transfer.source, scheduler.asked) == (1, 2, 0, 1)
    ledger.tell(transfer, [0.45, 0.5])
    nothing = ledger.ask()
    assert (nothing.task, nothing.source) == (2, 0)
    ledger.tell(nothing, [])  # no record transferred: member 2 falls back, unfinished
    view = ledger.snapshot().tasks[2]
    assert view.source is None and not view.finished and [t.index for t in ledger.snapshot().live] == [0, 2]
    assert ledger.ask().source is None and scheduler.asked == 2


def test_a_member_holding_its_representatives_best_is_judged_when_the_representative_settles():
    ledger = Ledger(_tasks(2), _Order(), Budget(max_trials=100), trials_per_slot=4, clock=lambda: 0.0)
    ledger.set_members(sharing.Members([None, 0], [0.5, 0.5], settled=8))
    ledger.tell(ledger.ask(), [0.5, 0.4, 0.6, 0.5])
    transfer = ledger.ask()
    ledger.tell(transfer, [1.5])  # slower than its default latency (1.0), while the representative is early
    assert ledger.snapshot().tasks[1].source == 0 and [t.index for t in ledger.snapshot().live] == [0]
    ledger.tell(ledger.ask(), [0.6, 0.5, 0.7, 0.8])  # 8 trials, no better: settled, member 1 falls back
    assert ledger.snapshot().tasks[1].source is None and [t.index for t in ledger.snapshot().live] == [0, 1]


def test_a_resumed_ledger_takes_held_members_slots_as_transfers_without_asking_the_scheduler():
    first = Ledger(_tasks(2), _Order(), Budget(max_trials=100), trials_per_slot=4, clock=lambda: 0.0)
    first.set_members(sharing.Members([None, 0], [0.5, 0.5], settled=4))
    told = []
    for _ in range(4):
        slot = first.ask()
        latencies = [1.5] if slot.source is not None else [0.8, 0.6, 0.7, 0.9]
        first.tell(slot, latencies)
        told.append((slot, latencies))
    assert [s.source for s, _ in told] == [None, 0, None, None]  # member 1 fell back after its transfer
    assert [t.index for t in first.snapshot().live] == [0, 1]
    scheduler = _Order()
    resumed = Ledger(_tasks(2), scheduler, Budget(max_trials=100), trials_per_slot=4, clock=lambda: 0.0)
    resumed.set_members(sharing.Members([None, 0], [0.5, 0.5], settled=4))
    for slot, latencies in told:
        again = resumed.recorded(slot.index, slot.task, len(latencies))
        assert again.source == slot.source
        resumed.tell(again, latencies)
    assert resumed.snapshot().tasks == first.snapshot().tasks and scheduler.asked == sum(
        s.source is None for s, _ in told)
    with pytest.raises(RuntimeError, match="before any slot"):
        resumed.set_members(sharing.Members([None, 0], [0.5, 0.5]))
