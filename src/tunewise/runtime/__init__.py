"""Nimble-style ahead-of-time GPU runtime: stream plans, operator DAGs and the CUDA graph engine.

``plan_streams`` assigns the operators of a DAG to streams (pure Python), ``plan_model`` does it for a PyTorch
model through torch.export on any device, and ``aot`` / ``aot_training`` capture a model on several CUDA
streams into CUDA graphs. Importing this package needs no GPU.
"""

from tunewise.runtime.dag import export_program, operator_dag, plan_exported, plan_model
from tunewise.runtime.engine import AotEngine, EagerEngine, StreamedModule, aot, aot_training
from tunewise.runtime.streams import StreamPlan, Sync, dag_width, plan_streams

__all__ = [
    "AotEngine",
    "EagerEngine",
    "StreamPlan",
    "StreamedModule",
    "Sync",
    "aot",
    "aot_training",
    "dag_width",
    "export_program",
    "operator_dag",
    "plan_exported",
    "plan_model",
    "plan_streams",
]
