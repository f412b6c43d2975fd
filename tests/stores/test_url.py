"""Store URLs shown to people: the password is hidden wherever it sits in the URL."""

import pytest

from tunewise import stores
from tunewise.errors import InputError


@pytest.mark.parametrize("url,shown", [
    ("postgresql+psycopg://tuner:S3cret@db:5432/tw", "postgresql+psycopg://tuner:***@db:5432/tw"),
    ("postgresql+psycopg://tuner@db/tw?password=S3cret&sslmode=require",
     "postgresql+psycopg://tuner@db/tw?password=***&sslmode=require"),
    ("postgresql+psycopg://tuner:S3cret@db:port/tw", "postgresql+psycopg://tuner:***@db:port/tw"),  # unparseable
])
def test_display_url_hides_the_password(url, shown):
    assert stores.display_url(url) == shown
    assert stores.hide_secrets(f"failed: {url} (password S3cret)", url) == f"failed: {shown} (password ***)"


def test_a_url_without_password_is_shown_as_is():
    assert stores.display_url("sqlite:///tunewise.db") == "sqlite:///tunewise.db"
    assert stores.hide_secrets("sqlite:///tunewise.db is locked", "sqlite:///tunewise.db") == \
        "sqlite:///tunewise.db is locked"


@pytest.mark.parametrize("url,expected", [
    ("postgresql+psycopg://tuner:S3cret@127.0.0.1:1/tw?connect_timeout=1", "cannot open the store"),
    ("postgresql+psycopg://tuner:S3cret@127.0.0.1:1/tw?no_such_option=1", "cannot open the store"),
    ("postgresql+psycopg://tuner:S3cret@127.0.0.1:port/tw", "bad store URL"),
])
def test_store_errors_are_one_line_and_hide_the_password(url, expected):
    with pytest.raises(InputError, match=expected) as err:
        stores.create(url)
    assert "S3cret" not in str(err.value) and "tuner:***@" in str(err.value) and "\n" not in str(err.value)
