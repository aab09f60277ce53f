"""The README stays a short front page and the docs site stays whole (fast; no mkdocs needed).

`make lint` builds the site with `mkdocs build --strict`, which checks the links between
pages; the README is not a page of the site, so its links are checked here, along with the
rules the README keeps: under 130 lines, `make demo` and `make test` its first two commands.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
NAV_ENTRY = re.compile(r"^\s*-\s[^:]+:\s*(\S+\.md)\s*$", re.MULTILINE)


def test_the_readme_fits_on_a_screen_and_starts_with_the_two_commands() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) < 130, f"README.md has {len(lines)} lines: move text into docs/"
    commands = [line.split("#")[0].strip() for line in lines if line.startswith("make ")]
    assert commands[:2] == ["make demo", "make test"]


def test_every_relative_link_of_the_readme_names_a_file_of_the_repository() -> None:
    targets = [t for t in LINK.findall(README.read_text()) if "://" not in t]
    assert targets, "the README links into docs/"
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, f"README.md links to missing files: {missing}"


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    nav = set(NAV_ENTRY.findall((ROOT / "mkdocs.yml").read_text()))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert nav == pages


def test_the_walkthrough_and_the_tour_hold_the_one_block_their_test_runs() -> None:
    assert (DOCS / "walkthrough.md").read_text().count("```bash walkthrough\n") == 1
    assert README.read_text().count("```bash tour\n") == 1


def test_nothing_points_outside_the_repository() -> None:
    files = [README, ROOT / "mkdocs.yml", *DOCS.rglob("*.md")]
    leaks = [f.name for f in files if re.search(r"\.\./shared|/work/", f.read_text())]
    assert not leaks, f"paths outside the repository in {leaks}"


# A repository path named in backticks: a top-level directory of the repository, then more.
# Files the docs name on purpose although they do not exist: an example of a new file, and
# what `make reproduce` writes.
NOT_IN_THE_REPOSITORY = {
    "storage/gcs.py",
    "bench/bench_NAME.py",
    "reports/reproduce.md",
    "reports/reproduce.png",
    "reports/cache",
    "storage.gcs",
}
CODE_SPAN = re.compile(r"`([^`\n]+)`")
PATH_LIKE = re.compile(r"(?<![\w./-])([A-Za-z_][\w-]*/[\w./-]*[\w/])")
PY_FILE = re.compile(r"(?<![\w./-])([A-Za-z_][\w-]*/[\w/-]*\.py)\b")
DOTTED = re.compile(r"(?<![\w./-])([a-z_]+(?:\.[a-z_]\w*)+)")


def _packages() -> set[str]:
    return {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}


def _named_paths(text: str) -> set[str]:
    tops = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")}
    tops |= {"reports"}
    found = set()
    for span in CODE_SPAN.findall(text):
        for path in PATH_LIKE.findall(span):
            if path.split("/")[0] in tops:
                found.add(path)
    found |= {path for path in PY_FILE.findall(text) if path.split("/")[0] in tops}
    return found


def _named_modules(text: str) -> set[str]:
    packages = _packages()
    found = set()
    for span in CODE_SPAN.findall(text):
        for dotted in DOTTED.findall(span):
            parts = dotted.split(".")
            if parts[0] in packages and not dotted.endswith((".py", ".md", ".json")):
                found.add(".".join(parts[:2]))
    return found


def _module_exists(dotted: str) -> bool:
    """`a.b` names a module or package `a/b`, or something `a/__init__.py` defines."""
    first, second = dotted.split(".")
    base = ROOT / first
    if (base / f"{second}.py").exists() or (base / second / "__init__.py").exists():
        return True
    return re.search(rf"\b{re.escape(second)}\b", (base / "__init__.py").read_text()) is not None


def test_every_path_and_module_the_docs_name_exists() -> None:
    files = [README, *sorted(DOCS.rglob("*.md"))]
    missing = []
    for file in files:
        text = file.read_text()
        for path in sorted(_named_paths(text) - NOT_IN_THE_REPOSITORY):
            if not (ROOT / path).exists():
                missing.append(f"{file.relative_to(ROOT)}: {path}")
        for dotted in sorted(_named_modules(text) - NOT_IN_THE_REPOSITORY):
            if not _module_exists(dotted):
                missing.append(f"{file.relative_to(ROOT)}: {dotted}")
    assert not missing, "the docs name what is not in the repository:\n" + "\n".join(missing)
