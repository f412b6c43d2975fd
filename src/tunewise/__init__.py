"""tunewise: fast, cheap deep-learning model tuning on Apache TVM MetaSchedule and Relax."""

__version__ = "0.1.0"
