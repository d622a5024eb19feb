"""Every measured figure in README.md and docs/ sits in a generated block that equals what the
measuring script renders from its stored run (scripts/doc_blocks.py); no benchmark runs here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import doc_blocks

ROOT = Path(__file__).resolve().parents[1]


def _copy_docs(tmp_path: Path) -> Path:
    for name in ("README.md", "CHANGELOG.md"):
        if (ROOT / name).is_file():
            shutil.copyfile(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    return tmp_path


def test_every_generated_block_equals_its_rendering_from_the_stored_run():
    assert doc_blocks.stale() == [], "run: .venv/bin/python -m scripts.doc_blocks --write"


def test_every_generated_block_is_registered_for_its_file_and_none_is_missing():
    assert doc_blocks.unowned() == []


def test_every_stored_source_exists_and_is_tracked_beside_its_doc():
    for block in doc_blocks.BLOCKS.values():
        assert (ROOT / block.doc).is_file(), block
        if block.source:
            assert (ROOT / block.source).is_file(), f"{block.source}: run {block.measured_by}"
            json.loads((ROOT / block.source).read_text())


@pytest.mark.parametrize("name", [n for n, b in doc_blocks.BLOCKS.items() if b.source])
def test_a_figure_edited_by_hand_in_the_doc_is_found_stale(tmp_path, name):
    root = _copy_docs(tmp_path)
    block = doc_blocks.BLOCKS[name]
    doc = root / block.doc
    text = doc.read_text()
    start = text.index(f"<!-- BEGIN generated:{name} -->")
    digit = re.compile(r"\d").search(text, start)
    doc.write_text(text[:digit.start()] + str((int(digit[0]) + 1) % 10) + text[digit.end():])
    assert doc_blocks.stale(root) == [doc]


@pytest.mark.parametrize("name", [n for n, b in doc_blocks.BLOCKS.items() if b.source])
def test_a_new_stored_run_makes_the_doc_stale_until_it_is_rewritten(tmp_path, name):
    root = _copy_docs(tmp_path)
    block = doc_blocks.BLOCKS[name]
    data = json.loads((root / block.source).read_text())
    changed = _change_a_figure(name, data)
    (root / block.source).write_text(json.dumps(changed))
    assert doc_blocks.stale(root) == [root / block.doc]
    written = doc_blocks.store(name, changed, root)  # what the measuring script's --write-docs does
    assert written == [root / block.source, root / block.doc]
    assert doc_blocks.stale(root) == [] and doc_blocks.unowned(root) == []
    assert json.loads((root / block.source).read_text()) == changed


def _change_a_figure(name: str, data: dict) -> dict:
    data = json.loads(json.dumps(data))
    if name == "bench":
        data["races"]["cadencia"][0] += 1
    elif name == "reliability":
        data["crashes"][0]["over_value"] += 1
    elif name == "prova":
        data["summaries"][-1]["figuras"]["debitos_duplicados"] += 1
    else:
        raise AssertionError(f"no figure to change for {name}: add one here")
    return data


def test_a_block_nobody_registered_or_an_unpaired_marker_is_reported(tmp_path):
    root = _copy_docs(tmp_path)
    extra = root / "docs" / "extra.md"
    extra.write_text("# x\n\n<!-- BEGIN generated:made-up -->\n42 tests\n<!-- END generated:made-up -->\n")
    (root / "docs" / "half.md").write_text("<!-- BEGIN generated:bench -->\n")
    problems = doc_blocks.unowned(root)
    assert any("extra.md" in p and "made-up" in p for p in problems), problems
    assert any("half.md" in p for p in problems), problems


def test_fill_needs_exactly_one_block_of_the_name():
    with pytest.raises(doc_blocks.DocBlockError):
        doc_blocks.fill("no block here", "bench", "x")
    twice = "<!-- BEGIN generated:a -->\n<!-- END generated:a -->\n" * 2
    with pytest.raises(doc_blocks.DocBlockError):
        doc_blocks.fill(twice, "a", "x")
    once = "head\n<!-- BEGIN generated:a -->\nold\n<!-- END generated:a -->\ntail\n"
    assert doc_blocks.fill(once, "a", "new") == "head\n<!-- BEGIN generated:a -->\nnew\n<!-- END generated:a -->\ntail\n"


# Figures that a script measures and prose once repeated by hand (they went stale): a test count, a
# suite's duration, the proof's debit counts. Outside a generated block they are refused.
HAND_TYPED_FIGURE = re.compile(r"\b\d[\d,]* tests\b(?! (that|which|per))|\b\d+ (passed|collected)\b"
                               r"|\b\d+ real debits\b|\b\d+ duplicate debits\b")


def _outside_blocks(text: str) -> str:
    return re.sub(r"<!-- BEGIN generated:([a-z0-9-]+) -->.*?<!-- END generated:\1 -->", "", text, flags=re.S)


def test_no_measured_figure_is_typed_by_hand_outside_a_generated_block():
    found = []
    for path in doc_blocks.docs():
        if path.is_file() and "decisions" not in path.parts and path.name != "CHANGELOG.md":
            for match in HAND_TYPED_FIGURE.finditer(_outside_blocks(path.read_text())):
                found.append(f"{path.relative_to(ROOT)}: {match[0]!r}")
    assert found == [], "put the figure in a generated block, or link to the script that prints it"


def test_the_stored_runs_load_back_into_the_objects_the_scripts_render():
    """What a measuring script stores is what its renderer reads: dump(load(x)) == x."""
    from scripts.perf import stored
    from scripts.reliability.run import Figures

    bench = json.loads((ROOT / doc_blocks.BLOCKS["bench"].source).read_text())
    assert json.loads(json.dumps(stored.dump(*stored.load(bench)))) == bench
    reliability = json.loads((ROOT / doc_blocks.BLOCKS["reliability"].source).read_text())
    assert json.loads(json.dumps(Figures.from_json(reliability).to_json())) == reliability


def test_the_check_runs_as_the_docs_show_it_from_a_checkout_without_pythonpath():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-m", "scripts.doc_blocks", "--check"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
