"""``scripts/selo.py`` on the local stack: eleven forged tool calls, each refused at the
edge with its code, no new gateway debit and no database change; the sealed control call runs."""

from __future__ import annotations

from scripts import selo


def test_the_attack_script_finds_every_forged_call_refused_with_no_effect(local_stack):
    result = selo.run(local_stack)
    assert [(r.case, r.code) for r in result.rows] == [(r.case, r.expected) for r in result.rows]
    assert sorted(r.expected for r in result.rows) == [1001, 1003, 1004, 1005, 1006, 2001, 2002, 2003, 2003,
                                                       2004, 2005]
    assert result.debits == 0 and result.db_changes == 0
    assert result.legitimate and result.ok
