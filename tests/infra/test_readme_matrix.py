"""README's access matrix is exactly what infra/contract.py renders."""

from pathlib import Path

from infra import contract

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_access_matrix_equals_the_contract():
    block = contract.readme_block(README.read_text())
    assert block == contract.render_markdown(), (
        "README.md's access matrix is out of date: run `.venv/bin/python -m infra.contract --write-readme`")


def test_the_matrix_names_every_role_and_grant():
    rendered = contract.render_markdown()
    for role in contract.build(contract.StackConfig()):
        assert (role.role_name or role.logical_id) in rendered
        for grant in role.grants:
            for action in grant.actions:
                assert f"`{action}`" in rendered
