"""The PostgreSQL database a benchmark is given, made empty before the benchmark writes to it."""

from __future__ import annotations


def empty(url: str) -> None:
    """Drop everything in the public schema of the database at ``url`` (a SQLAlchemy URL)."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP SCHEMA IF EXISTS public CASCADE")
        conn.exec_driver_sql("CREATE SCHEMA public")
    engine.dispose()
