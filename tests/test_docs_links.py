"""Every relative link of README.md and docs/*.md names a file that exists and, where it names a
section (``FILE.md#anchor``), a heading of that file, by GitHub's anchor rule. Moving tools into
folders renamed headings such as "The built-in experiment (`tools/compare/compare_retrieval.py`)"
and left five links pointing nowhere, unnoticed, until this test."""
import functools
import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = re.compile(r"\]\(([^)#\s]*)(?:#([^)\s]+))?\)")


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a heading's text: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces turned into ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors(path: str) -> frozenset:
    """The anchors of every heading of the markdown file ``path`` (fenced code skipped), read once
    per file however many links name it."""
    found, fenced = set(), False
    with open(path) as f:
        for line in f:
            if line.startswith("```"):
                fenced = not fenced
            m = None if fenced else re.match(r"#+ (.*)", line)
            if m:
                found.add(github_anchor(m.group(1)))
    return frozenset(found)


def broken_links(path: str) -> list:
    """``"path: target"`` for each relative link of ``path`` whose file or heading is missing."""
    with open(path) as f:
        text = f.read()
    broken = []
    for m in LINK.finditer(text):
        target, anchor = m.group(1), m.group(2)
        if re.match(r"[a-z]+:", target):
            continue
        linked = os.path.normpath(os.path.join(os.path.dirname(path), target)) if target else path
        if not os.path.exists(linked):
            broken.append(f"{path}: {target}")
        elif anchor and linked.endswith(".md") and anchor not in anchors(linked):
            broken.append(f"{path}: {target}#{anchor}")
    return broken


def test_github_anchor_by_hand():
    assert github_anchor("Issue 43's runs: 6,000 iterations") == "issue-43s-runs-6000-iterations"
    assert github_anchor("The built-in experiment (`tools/compare/compare_retrieval.py`)") == (
        "the-built-in-experiment-toolscomparecompare_retrievalpy")


def test_broken_links_found(tmp_path):
    (tmp_path / "B.md").write_text("# Real heading\n```\n# not a heading\n```\n")
    page = tmp_path / "A.md"
    page.write_text("[ok](B.md#real-heading) [gone](C.md) [no section](B.md#not-a-heading) "
                    "[here](#a-title) [web](https://example.com/x#y)\n## A title\n")
    assert broken_links(str(page)) == [f"{page}: C.md", f"{page}: B.md#not-a-heading"]


def test_readme_and_docs_links_resolve():
    pages = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    assert len(pages) > 10
    broken = [b for page in pages for b in broken_links(page)]
    assert broken == []
