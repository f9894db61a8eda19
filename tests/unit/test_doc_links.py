"""Every link to a document resolves inside the repository (README, docs/, k8s/, docstrings)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKDOWN = [ROOT / "README.md", ROOT / "k8s" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_DOC_REF = re.compile(r"\b(docs/[\w./-]+\.md)\b")


def _local_targets(path: Path) -> list[str]:
    return [t.split("#")[0] for t in _LINK.findall(path.read_text())
            if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def test_markdown_links_resolve() -> None:
    missing = [f"{md.relative_to(ROOT)} -> {target}" for md in MARKDOWN for target in _local_targets(md)
               if not (md.parent / target).exists()]
    assert missing == []


def test_references_to_docs_in_code_and_config_resolve() -> None:
    files = [p for pattern in ("services/**/*.py", "scripts/*.py", "tests/**/*.py", "configs/*.yaml", "k8s/**/*.yaml")
             for p in ROOT.glob(pattern)]
    missing = sorted({f"{p.relative_to(ROOT)} -> {ref}" for p in files for ref in _DOC_REF.findall(p.read_text())
                      if not (ROOT / ref).exists()})
    assert missing == []


def test_no_reference_to_documents_outside_the_repository() -> None:
    outside = re.compile(r"\b(DESIGN|ALGORITHM|STYLE|MACHINE-NOTES|LIVE-USAGE)\.md\b|\.\./shared")
    files = [p for pattern in ("services/**/*.py", "tests/**/*.py", "scripts/*.py", "docs/*.md", "*.md", "k8s/**/*")
             for p in ROOT.glob(pattern) if p.is_file() and p != Path(__file__)]
    found = [str(p.relative_to(ROOT)) for p in files if outside.search(p.read_text(errors="replace"))]
    assert found == []


def test_the_check_finds_a_broken_link(tmp_path: Path) -> None:
    doc = tmp_path / "a.md"
    doc.write_text("see [x](missing.md), [y](https://example.com) and [z](#top)")
    assert _local_targets(doc) == ["missing.md"]
