"""The history entry the confirmation gate leaves when a conversation waits on an
approval (what a decision checks the conversation waits on), for tests that set a
conversation's state by hand."""
from __future__ import annotations

import json
from typing import Any


def awaiting(approval: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_aguarda", "is_error": True,
                                         "content": json.dumps({"erro": "aguardando_aprovacao",
                                                                "aprovacaoId": approval})}]}
