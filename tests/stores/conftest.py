"""Every store backend the conformance suite runs on: SQLite always, PostgreSQL when
``TUNEWISE_TEST_POSTGRES_URL`` names a server (``.ci/run`` starts one), with an empty schema for each test."""

import pytest


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """The URL of a new, empty store of each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/tunewise.db"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def store(store_url):
    from tunewise import stores

    s = stores.create(store_url)
    yield s
    s.close()
