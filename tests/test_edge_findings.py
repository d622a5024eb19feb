"""Found by scripts/confiabilidade.py's hostile inputs: free text is "rejected, never
stripped" (cadencia_shared/models.py), but ``strip_whitespace`` used to run before the
control-character check, so a separator or control character that Python counts as
whitespace, at either end, was silently removed and the update accepted. The check now
runs on the text as sent."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from atualizar_cadastro.models import ProfileUpdateRequest
from cadencia_shared.models import CustomerMessage

# Python's str.strip() removes these, and each is in a refused category (Zl, Zp, Cc).
STRIPPED_CONTROLS = ["\u2028", "\u2029", "\u0085", "\x0b", "\x0c"]


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


@pytest.mark.parametrize("char", STRIPPED_CONTROLS, ids=lambda c: f"U+{ord(c):04X}")
def test_a_control_character_at_either_end_of_a_customer_message_is_refused(char):
    from pydantic import TypeAdapter

    adapter = TypeAdapter(CustomerMessage)
    for sent in (char + "cadê meu reembolso?", "cadê meu reembolso?" + char):
        with pytest.raises(ValidationError):
            adapter.validate_python(sent)
    assert adapter.validate_python("  cadê meu reembolso?\n") == "cadê meu reembolso?"
