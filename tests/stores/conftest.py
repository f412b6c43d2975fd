"""Every store backend the conformance suite runs on: SQLite always, PostgreSQL when
``TUNEWISE_TEST_POSTGRES_URL`` names a server (``.ci/run`` starts one), with an empty schema for each test."""

import os

import pytest

POSTGRES = os.environ.get("TUNEWISE_TEST_POSTGRES_URL")


def _empty_postgres() -> str:
    import sqlalchemy

    engine = sqlalchemy.create_engine(POSTGRES.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP SCHEMA IF EXISTS public CASCADE")
        conn.exec_driver_sql("CREATE SCHEMA public")
    engine.dispose()
    return POSTGRES


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """The URL of a new, empty store of each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/tunewise.db"
    if not POSTGRES:
        pytest.skip("TUNEWISE_TEST_POSTGRES_URL is not set (.ci/run starts a PostgreSQL server and sets it)")
    return _empty_postgres()


@pytest.fixture
def store(store_url):
    from tunewise import stores

    s = stores.create(store_url)
    yield s
    s.close()
