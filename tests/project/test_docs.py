"""The documentation cannot drift: the generated pages equal the generator's output, the pipeline
diagram has every edge of dvc.yaml, the README stays short and its links resolve, every path the
docs name exists, and the site builds offline with warnings as errors."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gavil import docs
from gavil.params import Params
from tests.helpers import ROOT

README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").rglob("*.md"))


def test_generated_pages_equal_the_generator_output():
    assert docs.stale(ROOT) == [], "run `gavil docs --write` and commit docs/"


def test_render_replaces_only_the_block_and_refuses_a_page_without_markers():
    start, end = docs.START.format(name="x"), docs.END.format(name="x")
    page = f"# T\n\nhand text\n\n{start}\nold\n{end}\n\nmore hand text\n"
    assert docs.render(page, {"x": lambda: "new"}) == f"# T\n\nhand text\n\n{start}\nnew\n{end}\n\nmore hand text\n"
    with pytest.raises(ValueError, match="markers"):
        docs.render("# no markers\n", {"x": lambda: "new"})


def _diagram_edges() -> set[tuple[str, str]]:
    text = (ROOT / "docs/pipeline.md").read_text()
    block = re.search(r"```mermaid\n(.*?)```", text, re.S)
    assert block, "docs/pipeline.md has no mermaid diagram"
    return set(re.findall(r"^\s*(\w+) -->(?:\|[^|]*\|)? (\w+)\s*$", block.group(1), re.M))


def _dvc_yaml_edges() -> set[tuple[str, str]]:
    """Independent of the registry: a stage's dep that is another stage's out (or lies inside an
    out folder) is an edge."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]

    def outs(s: dict) -> list[str]:
        return [next(iter(o)) if isinstance(o, dict) else o for o in s.get("outs", [])]

    edges = set()
    for name, s in stages.items():
        for dep in s.get("deps", []):
            for other, o in stages.items():
                if other != name and any(dep == out or dep.startswith(out.rstrip("/") + "/") for out in outs(o)):
                    edges.add((other, name))
    return edges


def test_the_diagram_has_every_dvc_yaml_edge_and_no_other():
    dvc = _dvc_yaml_edges()
    # score_candidates -> adversarial_filter is no edge: AF only reads the rival's embedding cache, a local
    # cache that orders nothing (docs/determinism.md)
    assert len(dvc) >= 20 and {("build_instances", "adversarial_filter"), ("select_instances", "aflite")} <= dvc
    assert ("score_candidates", "adversarial_filter") not in dvc
    assert _diagram_edges() == dvc


def test_the_diagram_shows_every_stage():
    stages = set(yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"])
    text = (ROOT / "docs/pipeline.md").read_text()
    block = re.search(r"```mermaid\n(.*?)```", text, re.S)
    assert block and stages <= set(re.findall(r"\w+", block.group(1)))


def test_the_params_reference_names_every_key_of_params_yaml():
    page = (ROOT / "docs/params.md").read_text()
    data = yaml.safe_load((ROOT / "params.yaml").read_text())

    def keys(d: dict, prefix: str = ""):
        """Every dotted key; into a mapping only where it is a section of keys (a nested model), not
        a mapping of values such as ``instances.game_sets`` or ``prefect.deployments``."""
        for k, v in d.items():
            yield f"{prefix}{k}"
            if isinstance(v, dict) and f"`{prefix}{k}.{next(iter(v), '')}`" in page:
                yield from keys(v, f"{prefix}{k}.")

    missing = [k for k in keys(data) if f"`{k}`" not in page]
    assert not missing, missing
    assert all(f"## `{section}`" in page for section in Params.model_fields)


def test_yaml_comments_follow_nesting_and_ignore_hashes_in_quotes():
    text = 'a:  # section a\n  # above b\n  b: 1  # after b\n  c: "x # not a comment"\n  d:\n    e: [1,\n        2]  # tail\n'
    assert docs.yaml_comments(text) == {"a": "section a", "a.b": "above b after b", "a.d.e": "tail"}


def test_readme_is_short_and_keeps_the_two_setup_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 150
    assert "python3 -m venv .venv && . .venv/bin/activate && pip install -c constraints.txt -e . && dvc repro" in text
    assert (
        'python3 -m venv .venv && . .venv/bin/activate && pip install -c constraints.txt -e ".[test]" && pytest' in text
    )


#: What a page about the project does not say: commit ids, issue numbers, the sessions that built it.
HISTORY = re.compile(r"\b[0-9a-f]{7,40}\b(?<![0-9]{7})|\bissue \d+|\bsession\b(?! token)|\bbefore issue\b", re.I)


@pytest.mark.parametrize("page", ["README.md", *(p.relative_to(ROOT).as_posix() for p in PAGES)])
def test_no_page_tells_the_story_of_its_making(page):
    """No commit ids, no issue numbers, no sessions: the README and docs describe the project as it is."""
    text = (ROOT / page).read_text()
    text = re.sub(r"[0-9a-f]{64}", "", text)  # sha256 pins (model weights) are content, not history
    found = [m.group(0) for m in HISTORY.finditer(text)]
    assert not found, f"{page}: {found[:5]}"


#: A pointer into the documentation from code, params, CLI help or a page: ``README "<heading>"`` or
#: ``docs/<page>.md "<heading>"`` (or ``docs/<page>.md`` alone).
POINTER = re.compile(r'\b(README|docs/[\w-]+\.md)(?: "([^"\n]+)")?')
POINTER_FILES = [".py", ".yaml", ".yml", ".toml", ".md", ".html", ".js"]


def _headings(page: Path) -> set[str]:
    text, out, fence = page.read_text(), set(), False
    for line in text.splitlines():
        fence = fence != line.startswith("```")
        if not fence and (m := re.match(r"#+\s+(.*?)\s*$", line)):
            out.add(m.group(1))
    return out


def test_every_pointer_to_a_readme_or_docs_section_resolves():
    """A sweep over every text file of the project (code, params.yaml, pyproject, the game's pages, the
    docs themselves): each ``README "<heading>"`` / ``docs/<page>.md "<heading>"`` names an existing
    page and heading."""
    roots = [ROOT / d for d in ("gavil", "stages", "schemas", "flows", "benchmarks", "tests", "docs", ".ci")]
    files = [f for r in roots for f in r.rglob("*") if f.is_file() and f.suffix in POINTER_FILES]
    files += [ROOT / n for n in ("README.md", "params.yaml", "pyproject.toml", "mkdocs.yml", "data/game/README.md")]
    seen, bad = 0, []
    for f in files:
        if f.name in ("test_docs.py", "test_pointers.py"):
            continue  # their broken pointers are planted
        for m in POINTER.finditer(f.read_text(encoding="utf-8", errors="replace")):
            page = ROOT / ("README.md" if m.group(1) == "README" else m.group(1))
            if m.group(1) == "README" and not m.group(2):
                continue  # the word README, no section named
            seen += 1
            if not page.exists():
                bad.append(f"{f.relative_to(ROOT)}: {m.group(0)} (no such page)")
            elif m.group(2) and m.group(2) not in _headings(page):
                bad.append(f"{f.relative_to(ROOT)}: {m.group(0)} (no such heading)")
    assert seen >= 15, seen
    assert not bad, bad


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def _relative_links(text: str) -> list[str]:
    links = [a or b for a, b in LINK.findall(text)]
    return [x for x in links if not re.match(r"[a-z]+:|#", x)]


def test_every_relative_link_in_the_readme_resolves():
    links = _relative_links(README.read_text())
    assert links, "the README links into docs/"
    missing = [x for x in links if not (ROOT / x.split("#")[0]).exists()]
    assert not missing, missing


def test_every_relative_link_in_the_docs_resolves():
    """mkdocs --strict checks these too; this runs without mkdocs and names the page."""
    missing = [
        f"{p.relative_to(ROOT)}: {x}"
        for p in PAGES
        for x in _relative_links(p.read_text())
        if not (p.parent / x.split("#")[0]).exists()
    ]
    assert not missing, missing


PATH = re.compile(r"`((?:gavil|stages|schemas|flows|tests|benchmarks)/[\w./-]+\.py)")


def test_every_source_file_the_readme_and_docs_name_exists():
    named = {m for p in [README, *PAGES] for m in PATH.findall(p.read_text())}
    assert "gavil/pipeline/registry.py" in named
    missing = sorted(n for n in named if not (ROOT / n).exists())
    assert not missing, f"the docs name files that do not exist: {missing}"


def test_no_page_refers_to_a_methods_file_outside_the_repository():
    for p in [README, *PAGES]:
        for line in p.read_text().splitlines():
            assert "METHODS.md" not in line or "never part of the repository" in line, f"{p}: {line}"


def test_every_page_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [p.relative_to(ROOT / "docs").as_posix() for p in PAGES]
    assert [p for p in pages if p not in nav] == []


def test_the_site_builds_offline_with_warnings_as_errors(tmp_path):
    mkdocs = Path(sys.executable).parent / "mkdocs"
    if not mkdocs.exists():
        mkdocs = Path(shutil.which("mkdocs") or "mkdocs")
    out = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert (tmp_path / "site/api/registry/index.html").read_text().count("StageSpec") > 1
    page = (tmp_path / "site/pipeline/index.html").read_text()
    assert 'src="../pipeline.svg"' in page and (tmp_path / "site/pipeline.svg").is_file()  # the graph, offline
    assert 'class="mermaid"' not in page  # no diagram that needs a script from a CDN
