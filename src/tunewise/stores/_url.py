"""Store URLs as people see them: in every message and progress line the password is ``***``.

A password may sit in the URL's user part (``postgresql+psycopg://user:password@host/db``) or in its query
(``...?password=...``); both are hidden. :func:`hide_secrets` also masks them in any text, such as a driver's
error message that quotes the connection string.
"""

from __future__ import annotations

import re

from sqlalchemy.engine import URL, make_url

_MASK = "***"
_USER_PASSWORD = re.compile(r"(://[^/@:]*:)([^/@]+)@")
_QUERY_PASSWORD = re.compile(r"([?&]password=)([^&]+)")


def _parse(url: str | URL) -> URL | None:
    try:
        return make_url(url)
    except Exception:  # ArgumentError, or ValueError on a malformed port
        return None


def display_url(url: str | URL) -> str:
    """``url`` (text or SQLAlchemy URL) with its password, if any, replaced by ``***``."""
    parsed = _parse(url)
    shown = parsed.render_as_string(hide_password=True) if parsed else _USER_PASSWORD.sub(rf"\g<1>{_MASK}@", str(url))
    return _QUERY_PASSWORD.sub(rf"\g<1>{_MASK}", shown)


def passwords(url: str | None) -> list[str]:
    """The passwords ``url`` holds (none for a URL without one, or no URL)."""
    if not url:
        return []
    parsed = _parse(url)
    found = [match.group(2) for pattern in (_USER_PASSWORD, _QUERY_PASSWORD) for match in pattern.finditer(url)]
    if parsed is not None:  # the decoded forms too: p%40ss is p@ss to the driver
        found += [parsed.password, parsed.query.get("password")]
    return sorted({s for s in found if isinstance(s, str) and s}, key=len, reverse=True)


def hide_secrets(text: str, url: str | None) -> str:
    """``text`` with every password of ``url`` replaced by ``***``."""
    for secret in passwords(url):
        text = text.replace(secret, _MASK)
    return text
