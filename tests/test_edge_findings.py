"""Found by scripts/confiabilidade.py's hostile inputs on the merged code, kept as failing
tests for the owner of the strict edges (issue 8, item 3): free text is documented as
"rejected, never stripped" (cadencia_shared/models.py), but ``strip_whitespace`` runs
before the control-character check, so a separator or control character that Python
counts as whitespace, at either end, is silently removed and the update is accepted."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from atualizar_cadastro.models import ProfileUpdateRequest

# Python's str.strip() removes these, and each is in a refused category (Zl, Zp, Cc).
STRIPPED_CONTROLS = ["\u2028", "\u2029", "\u0085", "\x0b", "\x0c"]


@pytest.mark.xfail(strict=True, reason="edges: Address strips U+2028/U+2029/U+0085/VT/FF at the ends "
                   "before SingleLineText checks them, so they are accepted (documented as rejected)")
@pytest.mark.parametrize("where", ["start", "end"])
@pytest.mark.parametrize("char", STRIPPED_CONTROLS, ids=lambda c: f"U+{ord(c):04X}")
def test_a_control_character_at_either_end_of_an_address_is_refused(char, where):
    address = "Rua Nova, 870, Recife - PE"
    sent = char + address if where == "start" else address + char
    with pytest.raises(ValidationError):
        ProfileUpdateRequest.model_validate({"conversaId": "c-1", "clienteId": 1001, "campos": {"endereco": sent}})


def test_the_same_character_inside_an_address_is_refused():
    # The check itself works: only the ends escape it.
    for char in STRIPPED_CONTROLS:
        with pytest.raises(ValidationError):
            ProfileUpdateRequest.model_validate(
                {"conversaId": "c-1", "clienteId": 1001, "campos": {"endereco": f"Rua Nova,{char} 870, Recife - PE"}})
