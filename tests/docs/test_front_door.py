"""README.md is the front door: short, showing the very test command CI runs, and every relative
link in it and in the guides under docs/ leads to a file of the checkout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_README_LINES = 150
DOCUMENTS = (README, *sorted((ROOT / "docs").glob("*.md")))
FENCE = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, (
        f"README.md has {len(lines)} lines; move detail into a guide under docs/"
    )


def test_the_readme_shows_the_command_ci_runs() -> None:
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    ci_command = next(line for line in reversed(ci) if line and not line.startswith("#"))
    section = README.read_text().split("## Run the tests\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```sh\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)
    assert [block.strip() for block in blocks] == [ci_command]


def relative_links(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text())
    found = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL or an anchor in the same page
        found.append(target.split("#", 1)[0])
    return found


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file(path: Path) -> None:
    missing = [link for link in relative_links(path) if not (path.parent / link).exists()]
    assert not missing, f"{path.relative_to(ROOT)} links to files that do not exist: {missing}"


def test_the_readme_links_to_each_users_guide() -> None:
    links = set(relative_links(README))
    assert {"docs/DEPLOYMENTS.md", "docs/ADAPTERS.md", "docs/NIGHTLY.md"} <= links


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "[gone](missing.md#part) [url](https://example.com/x.md) [here](#top)\n"
        "```sh\necho [not](a-link.md)\n```\n"
    )
    assert relative_links(page) == ["missing.md"]


def test_every_contract_note_cited_is_stated() -> None:
    """Code, schemas, fixtures and tests cite `CONTRACT-NOTES §<id>`; each id is a heading or a
    bold item of docs/CONTRACT-NOTES.md, so no citation points at text the project lacks."""
    notes = (ROOT / "docs" / "CONTRACT-NOTES.md").read_text()
    stated = set(re.findall(r"^### ([USO][\d.]*\d)\b", notes, flags=re.MULTILINE))
    stated |= set(re.findall(r"^- \*\*([USO][\d.]*\d)\*\*", notes, flags=re.MULTILINE))
    cited: dict[str, set[str]] = {}
    for folder in ("fake_backends", "rl_conformance", "schemas", "fixtures", "tests", "docs"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in {".py", ".json", ".md"} and "__pycache__" not in path.parts:
                text = " ".join(path.read_text(errors="replace").split())
                for ids in re.findall(
                    r"CONTRACT-NOTES ((?:§[USO][\d.]*\d(?:[-/, ]+|and )*)+)", text
                ):
                    for found in re.findall(r"§([USO][\d.]*\d)", ids):
                        cited.setdefault(found, set()).add(str(path.relative_to(ROOT)))
    assert cited, "no citation of docs/CONTRACT-NOTES.md found"
    missing = {found: sorted(paths) for found, paths in cited.items() if found not in stated}
    assert not missing, f"cited sections docs/CONTRACT-NOTES.md does not state: {missing}"
