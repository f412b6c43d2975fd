"""The user's pages point at what exists: every relative link in README.md, docs/ and bench/ reaches a file (and
its heading, for a ``#anchor``), and every repository path a page names in backticks is there."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "bench").rglob("*.md"))]
FENCE = re.compile(r"```.*?```", re.S)
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)")
NAMED_PATH = re.compile(r"`((?:src|tests|bench|docs|scripts)/[\w./-]+?\.(?:py|md|json|json\.gz|png|html))`")


def _anchors(page: pathlib.Path) -> set[str]:
    """The anchors GitHub gives the headings of ``page``: lower case, punctuation dropped, spaces as hyphens,
    repeats numbered."""
    found, seen = set(), {}
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", FENCE.sub("", page.read_text()), re.M):
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def _broken_links(page: pathlib.Path) -> list[str]:
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, mailto:, ...
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no such heading")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_its_heading(page):
    assert _broken_links(page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_repository_path_a_page_names_exists(page):
    missing = [path for path in NAMED_PATH.findall(page.read_text()) if "*" not in path and "ISA" not in path
               and not (ROOT / path).exists()]
    assert missing == []


def test_a_link_to_a_missing_file_or_heading_is_found(tmp_path):
    (tmp_path / "other.md").write_text("# A heading\n\ntext\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#a-heading) [gone](missing.md) [no heading](other.md#nothing)\n"
                    "```\n[in a fence](ignored.md)\n```\n")
    assert _broken_links(page) == ["missing.md: no such file", "other.md#nothing: no such heading"]
