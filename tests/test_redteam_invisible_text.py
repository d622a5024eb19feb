"""Red-team finding on free text at the profile tool's edge."""

from __future__ import annotations

import pytest

from cadencia_shared.catalog import ATUALIZAR_CADASTRO
from tests.test_strict_edges import VALID, _assert_typed_refusal, unchanged  # noqa: F401 (fixture)

# Letters (category Lo) or marks (Mn) that Unicode lists as Default_Ignorable_Code_Point:
# they render as nothing, like the Cf characters the edge already refuses.
INVISIBLE = {
    "U+3164 HANGUL FILLER": "\u3164",
    "U+115F HANGUL CHOSEONG FILLER": "\u115f",
    "U+1160 HANGUL JUNGSEONG FILLER": "\u1160",
    "U+FFA0 HALFWIDTH HANGUL FILLER": "\uffa0",
    "U+034F COMBINING GRAPHEME JOINER": "\u034f",
}


@pytest.mark.parametrize("char", list(INVISIBLE.values()), ids=list(INVISIBLE))
def test_an_invisible_address_is_refused(tools, unchanged, char):  # noqa: F811
    """DEFECT: the free-text check refuses Unicode categories Cc/Cf/Zl/Zp/Co/Cs/Cn,
    but the default-ignorable *letters* (the Hangul fillers, category Lo) and the
    combining grapheme joiner (Mn) render as nothing too. ``"Rua" + 5×U+3164``, or
    five fillers alone, passed ``min_length=5`` and was written over the customer's
    address: an address nobody can read, or one that differs invisibly from what a
    human reviewer sees."""
    event = {**VALID[ATUALIZAR_CADASTRO.name], "campos": {"endereco": "Rua" + char * 5}}
    out = tools(ATUALIZAR_CADASTRO, event)
    _assert_typed_refusal(out, ATUALIZAR_CADASTRO.name)
    unchanged.check()
