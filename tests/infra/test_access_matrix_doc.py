"""docs/access-matrix.md's matrix is exactly what infra/contract.py renders."""

from pathlib import Path

from infra import contract

DOC = Path(__file__).resolve().parents[2] / "docs" / "access-matrix.md"


def test_the_docs_access_matrix_equals_the_contract():
    block = contract.doc_block(DOC.read_text())
    assert block == contract.render_markdown(), (
        "docs/access-matrix.md's matrix is out of date: run `.venv/bin/python -m infra.contract --write-doc`")


def test_the_matrix_names_every_role_and_grant():
    rendered = contract.render_markdown()
    for role in contract.build(contract.StackConfig()):
        assert (role.role_name or role.logical_id) in rendered
        for grant in role.grants:
            for action in grant.actions:
                assert f"`{action}`" in rendered
