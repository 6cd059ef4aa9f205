"""The house as a newcomer reads it: every path the docs name exists, and tests share helpers
through `tests/support/`, never by importing another test module (issue 32).

A moved module whose doc still names the old path sends a reader to nothing; a test module imported
by another runs its import-time setup twice and couples two tests' files. Both failed silently
before this check.
"""

from __future__ import annotations

import ast
import re

import pytest

from tests.support import ROOT

DOCS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
ROOMS = "api|orchestration|transforms|warehouse|cli|clients|tests|scripts|deploy|docs"
# A repository path in backticks: a room, then path characters; `::name` (a test id) is cut off.
PATH = re.compile(rf"`((?:{ROOMS})/[A-Za-z0-9_./-]+)(?:::[^`]*)?`")


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_a_doc_names_exists(doc: str) -> None:
    named = sorted(set(PATH.findall((ROOT / doc).read_text())))
    missing = [p for p in named if not (ROOT / p.rstrip("/")).exists() and "*" not in p and "<" not in p]
    assert not missing, f"{doc} names paths that do not exist: {missing}"


def test_no_test_module_imports_another_test_module_or_the_conftest() -> None:
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                last = node.module.rsplit(".", 1)[-1]
                if node.module.startswith("tests.") and (last.startswith("test_") or last == "conftest"):
                    offenders.append(f"{path.relative_to(ROOT)}: from {node.module} import ...")
    assert not offenders, "shared helpers belong in tests/support/:\n" + "\n".join(offenders)
