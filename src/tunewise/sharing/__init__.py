"""Schedule sharing between tasks, in three modes (:data:`MODES`):

- ``"off"``: every task is tuned alone.
- ``"same-anchor"``: tasks that run the same main computation with different fused epilogues give each other
  their best schedules before they are searched (:mod:`tunewise.sharing._anchor`); every task is searched.
- ``"selective"``: the TVM RFC "Selective tuning". Tasks are grouped by the similarity of their design spaces,
  whatever their shapes (:func:`similarity`, :func:`select_tasks`); only each group's representative is searched, and
  the other members are given its best schedules fitted to their own shapes (:func:`transfer_across`),
  falling back to a search of their own when that does not pay (:class:`Members`).

Independently of the mode, a task's first slot can start from the best records of the most similar workloads
other runs tuned in the same store (:func:`warm_sources`), and from a record base: the best records of many
workloads, shipped with the package for each CPU class or built by a team (:class:`RecordBase`,
:func:`open_base`), read beside the store, which wins.
"""

from tunewise.sharing._anchor import Offers, anchor_key, groups, transfer
from tunewise.sharing._members import MINOR, SETTLED, SHORTFALL, Members
from tunewise.sharing._planner import Planner
from tunewise.sharing._record_base import (
    BUNDLED,
    OFF,
    TOP,
    BaseIndex,
    BaseRecord,
    BaseWorkload,
    RecordBase,
    build_base,
    bundled_path,
    open_base,
)
from tunewise.sharing._selection import THRESHOLD, Selection, flop_shares, latency_shares, select, select_tasks
from tunewise.sharing._similarity import Signature, inlined_blocks, record_signature, similarity, task_signature
from tunewise.sharing._transfer import Destination, destination, nearest_factors, transfer_across
from tunewise.sharing._warm import warm_sources

MODES = ("off", "same-anchor", "selective")
"""The sharing modes, in the order ``--share`` lists them."""

__all__ = ["BUNDLED", "MINOR", "MODES", "OFF", "SETTLED", "SHORTFALL", "THRESHOLD", "TOP", "BaseIndex", "BaseRecord",
           "BaseWorkload", "Destination", "Members", "Offers", "Planner", "RecordBase", "Selection", "Signature",
           "anchor_key", "build_base", "bundled_path", "destination", "flop_shares", "groups", "inlined_blocks",
           "latency_shares", "nearest_factors", "open_base", "record_signature", "select", "select_tasks",
           "similarity", "task_signature", "transfer", "transfer_across", "warm_sources"]
