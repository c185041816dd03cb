"""The documentation site builds from docs/ with MkDocs in strict mode, and README.md's links resolve.

`mkdocs.yml` lists every page in its nav; its `validation` settings make a page missing from the
nav, a link to a missing page or file and a missing anchor *warnings*, and `--strict` turns every
warning into a failed build.  The negative tests below prove the build really fails on each, so a
relaxed setting cannot pass unnoticed.  README.md lies outside docs/, where MkDocs does not look:
its relative links (and their anchors) are checked here directly, with the same Markdown `toc`
slugs MkDocs uses.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import markdown
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "mkdocs.yml"
DOCS = ROOT / "docs"
README = ROOT / "README.md"

# Absolute paths of the machines measurements ran on (the checkout, a worktree, a home folder, a
# scratch file): a reader's clone has none of them.  Reports name repository-relative paths instead.
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|home|root|tmp)/[\w.-]+")
TEXT_SUFFIXES = {".md", ".json", ".jsonl", ".py", ".txt", ".yaml", ".yml"}


def mkdocs_build(config: Path, site_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
         "--site-dir", str(site_dir)],
        capture_output=True, text=True, timeout=300, cwd=config.parent)


def copy_site(tmp_path: Path) -> Path:
    """A copy of mkdocs.yml and docs/ to break on purpose; returns the copied config."""
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(CONFIG, tmp_path / "mkdocs.yml")
    return tmp_path / "mkdocs.yml"


def test_site_builds_in_strict_mode(tmp_path):
    run = mkdocs_build(CONFIG, tmp_path / "site")
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stdout}\n{run.stderr}"
    assert (tmp_path / "site" / "index.html").is_file()


def test_config_makes_omissions_and_broken_links_fail():
    config = yaml.safe_load(CONFIG.read_text())
    assert config["strict"] is True
    validation = config["validation"]
    assert validation["nav"]["omitted_files"] == "warn"
    assert validation["nav"]["not_found"] == "warn"
    assert validation["links"]["not_found"] == "warn"
    assert validation["links"]["anchors"] == "warn"
    assert validation["links"]["unrecognized_links"] == "warn"


@pytest.mark.parametrize(("defect", "expected"), [
    ("broken link", "no-such-page.md"),
    ("broken anchor", "#no-such-section"),
    ("page missing from the nav", "orphan.md"),
    ("link out of docs/", "../README.md"),
])
def test_a_defect_fails_the_build(tmp_path, defect, expected):
    config = copy_site(tmp_path)
    docs = tmp_path / "docs"
    if defect == "page missing from the nav":
        (docs / "orphan.md").write_text("# Orphan\n\nIn no nav.\n")
    else:
        link = {"broken link": "no-such-page.md", "broken anchor": "cpu-engine.md#no-such-section",
                "link out of docs/": "../README.md"}[defect]
        with (docs / "index.md").open("a") as page:
            page.write(f"\nSee [this]({link}).\n")
    run = mkdocs_build(config, tmp_path / "site")
    output = run.stdout + run.stderr
    assert run.returncode != 0, f"a {defect} passed mkdocs build --strict:\n{output}"
    assert expected in output, output


def test_every_page_is_in_the_nav():
    """Stated on its own so that the failure names the pages (the build would too)."""
    def listed(entries):
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            if isinstance(value, list):
                yield from listed(value)
            else:
                yield value
    nav = set(listed(yaml.safe_load(CONFIG.read_text())["nav"]))
    pages = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")}
    assert sorted(pages - nav) == [], "pages missing from mkdocs.yml's nav"
    assert sorted(nav - pages) == [], "nav entries without a page"


def strip_code(text: str) -> str:
    """Markdown without fenced blocks and code spans (their brackets are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(page: Path) -> set[str]:
    """The heading ids Python-Markdown's toc extension (as MkDocs configures it) gives a page."""
    md = markdown.Markdown(extensions=["toc", "tables", "fenced_code"])
    md.convert(page.read_text())
    found, stack = set(), list(md.toc_tokens)
    while stack:
        token = stack.pop()
        found.add(token["id"])
        stack.extend(token["children"])
    return found


def readme_links() -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", strip_code(README.read_text()))


def test_readme_links_resolve():
    problems, checked = [], 0
    for link in readme_links():
        if re.match(r"[a-z][a-z0-9+.-]*:", link):      # http:, https:, mailto:
            continue
        checked += 1
        target, _, anchor = link.partition("#")
        path = (README.parent / target).resolve() if target else README
        if not path.exists():
            problems.append(f"{link}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            problems.append(f"{link}: {path.name} has no heading with the id '{anchor}'")
    assert checked > 10, "README.md should link into docs/"
    assert problems == [], "README.md links that do not resolve:\n" + "\n".join(problems)


def test_readme_links_into_the_site_only_to_pages_in_the_nav():
    text = CONFIG.read_text()
    for link in readme_links():
        target = link.partition("#")[0]
        if target.startswith("docs/") and target.endswith(".md"):
            assert target.removeprefix("docs/") in text, f"README.md links to {target}, not in the nav"


def test_readme_stays_short():
    lines = README.read_text().count("\n")
    assert lines <= 250, f"README.md has {lines} lines; topics belong in docs/"


def test_docs_record_no_machine_paths():
    found = []
    for path in sorted(DOCS.rglob("*")):
        if path.is_file() and path.suffix in TEXT_SUFFIXES:
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if MACHINE_PATH.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {MACHINE_PATH.search(line).group()}")
    assert found == [], "absolute machine paths (use repository-relative ones):\n" + "\n".join(found)


@pytest.mark.parametrize(("line", "machine"), [
    ("Peers: `/work/main/build/llama.cpp/bin/llama-server -m x.gguf`", True),
    ('"config_source": "/work/wt/issue16-quality/build_engines/fidelity/x.yaml"', True),
    ("throwaway scripts (`/tmp/perf/lora_speed.py` on the worker)", True),
    ("Peers: `build/llama.cpp/bin/llama-server -m x.gguf`", False),
    ("see https://github.com/NVIDIA/TensorRT-LLM/tree/main/examples", False),
    ("the chart mounts the volume at /models by default", False),
])
def test_machine_path_pattern(line, machine):
    assert bool(MACHINE_PATH.search(line)) is machine
