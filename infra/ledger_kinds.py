"""Ledger access by item kind: which role may do what to which kind of ledger item.

The ledger is one table whose partition key starts with the item's kind
(``cadencia_shared.ledger.table``: ``conversa#…``, ``aprovacao#…``; the channel's
``envio#``/``contato#``; the breaker's ``disjuntor#``). A grant on the table ARN
alone lets a role write every item: the orchestrator could mark its own approval
request approved. (Even with the grants below, an orchestrator may still write its
requests: what authorises a call is the ``decisao#`` item only the decision role writes,
``cadencia_shared.approval_use``.) Here each role that touches the ledger gets, per kind, the
actions its code calls, and every ledger grant is rendered with
``ForAllValues:StringLike`` on ``dynamodb:LeadingKeys`` = ``<prefix>*``. The
contract (``infra/contract.py``) and the constructs both render from this one table
(``ledger_grants``/``ledger_statements``); ``tests/infra/test_ledger_kinds.py``
evaluates the synthesized template against it and scans each role's code for the
kinds it uses. Decision record: docs/decisions/ledger-grants-by-item-kind.md.

Operations the condition cannot narrow, and how they are handled:

- ``Query`` on the unsettled index: ``LeadingKeys`` would be matched against the
  index's partition key (the ``pendencia`` mark), not the item's kind, so that grant
  stays on the index ARN without a condition. The index is KEYS_ONLY: reading a listed
  item needs the kind-scoped ``GetItem``.
- ``BatchGetItem``/``BatchWriteItem``/``TransactWriteItems``/``TransactGetItems``
  (whose ``ConditionCheck`` entries are authorized as ``ConditionCheckItem``): no role
  is granted any of them, so none can reach an item outside its kinds that way.
- ``ForAllValues`` holds vacuously for a request that names no key (``Scan``): no role
  is granted ``Scan`` on the ledger.
"""

from __future__ import annotations

from collections.abc import Mapping

from cadencia_shared.catalog import TOOLS

from .grants import Grant
from .logical_ids import Ids

GET, PUT, UPDATE = "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"
LEDGER_ARN = "${" + Ids.LEDGER + ".Arn}"  # as contract.att(Ids.LEDGER, "Arn") spells it

# Every kind of ledger item: its key prefix, and what it is.
KINDS: Mapping[str, str] = {
    "conversa#": "the conversation (lease, history, inbound claims, the chain's anchor)",
    "contador#": "a retry ceiling's counter",
    "aprovacao#": "an approval request and its lifecycle (its status alone authorises nothing)",
    "decisao#": "a person's decision on an approval request (only the decision role writes it)",
    "reivindicacao#": "a refund's idempotency claim",
    "primeiro-reembolso#": "the first conversation to ask to refund an order",
    "auditoria#": "an unchained audit record (only when no audit table is configured)",
    "auditoria-cabeca#": "the head anchor of an audit chain",
    "disjuntor#": "a tool's circuit breaker",
    "envio#": "a WhatsApp reply's outbox record",
    "contato#": "a conversation's WhatsApp address",
    "interruptor#": "a tool's kill switch (set by a supervisor, read before every call)",
    "sessao#": "a turn's SEAL session: the public key that signs its tool calls (docs/seal.md)",
    "jti#": "a SEAL envelope already used (single use, taken by the tool's edge)",
    "saida-console#": "a console session its person signed out of (the token's SHA-256 only)",
}

GPU = (GET, PUT, UPDATE)
GP = (GET, PUT)
GU = (GET, UPDATE)

# The orchestrator's loop, whichever channel feeds it.
_LOOP: dict[str, tuple[str, ...]] = {
    "conversa#": GPU,
    "contador#": GU,
    "aprovacao#": GPU,  # the request (PutItem), voiding/consuming/expiring it: display and lifecycle only
    "decisao#": (GET,),  # the person's decision, which the gate and the resume require before a call runs
    "reivindicacao#": (GET,),  # a refund's outcome, for the approval gate
    "primeiro-reembolso#": GP,
    "auditoria#": (PUT,),
    "auditoria-cabeca#": GU,
    "disjuntor#": GU,
    "envio#": GP,  # a decided approval's message to a WhatsApp customer
    "contato#": (GET,),
    "interruptor#": (GET,),  # read before every tool call; only the decision function sets one
    "sessao#": (PUT, UPDATE),  # the turn's SEAL session: opened (PutItem), closed (UpdateItem); nobody else writes it
}

# Every tool's edge (cadencia_shared/seal_edge.py): reads the call's SEAL session, uses up
# its envelope (a conditional PutItem of jti#) and reads the tool's kill switch again.
_SEAL_EDGE: dict[str, tuple[str, ...]] = {"sessao#": (GET,), "jti#": (PUT,), "interruptor#": (GET,)}

# Role logical id -> kind prefix -> the actions on it. Derived from what each role's
# code calls (the scan in tests/infra/test_ledger_kinds.py keeps the kinds honest).
_ROWS: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    Ids.ORCHESTRATOR_ROLE: _LOOP,
    Ids.WHATSAPP_CONSUMER_ROLE: {**_LOOP, "envio#": GPU, "contato#": GP},
    Ids.WHATSAPP_HUMAN_REPLY_ROLE: {
        "conversa#": GPU, "envio#": GPU, "contato#": (GET,), "auditoria#": (PUT,), "auditoria-cabeca#": GU,
        "saida-console#": (GET,),  # a signed-out console token answers no customer
    },
    Ids.DECISION_ROLE: {
        # PutItem: approving a LOWER amount records a new request bound to the new arguments
        # (cadencia_shared.approval_policy), which this role creates and decides at once.
        "aprovacao#": GPU, "conversa#": (GET,), "auditoria#": (PUT,), "auditoria-cabeca#": GU,
        "decisao#": GP,  # the decision itself: conditional PutItem, once; no role has any other write on it
        "interruptor#": GP,  # the supervisors' switch route (GET /interruptores, POST /interruptores/{ferramenta})
        "saida-console#": GP,  # sign-out records the session's end; every console page reads it
    },
    Ids.RECONCILER_ROLE: {"reivindicacao#": GU},
    # A refund above the limit names its approval: the edge reads that request and the person's
    # decision on it (codes 2005/2006; cadencia_shared.seal_approvals.ledger_approvals).
    Ids.role("emitir_reembolso"): {"reivindicacao#": GPU, "aprovacao#": (GET,), "decisao#": (GET,)},
    Ids.role("atualizar_cadastro"): {"auditoria-cabeca#": GU},
}
# Every tool of the registry gets SEAL's edge beside what its own row says (a new tool too).
LEDGER_ACCESS: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    **_ROWS, **{Ids.role(t.package): {**_ROWS.get(Ids.role(t.package), {}), **_SEAL_EDGE} for t in TOOLS.values()},
}


def kind_sets(role_logical_id: str) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """(actions, key patterns) per distinct action set of the role's row, in a stable
    order: one IAM statement each. [] for a role without a row."""
    by_actions: dict[tuple[str, ...], list[str]] = {}
    for prefix, actions in LEDGER_ACCESS.get(role_logical_id, {}).items():
        by_actions.setdefault(tuple(sorted(actions)), []).append(prefix + "*")
    return [(actions, tuple(sorted(patterns))) for actions, patterns in sorted(by_actions.items())]


def _kinds_of(patterns: tuple[str, ...]) -> str:
    return ", ".join(p.removesuffix("*") for p in patterns)


def ledger_grants(role_logical_id: str) -> tuple[Grant, ...]:
    """The contract's ledger grants of a role (``infra/contract.py``)."""
    return tuple(Grant(actions, (LEDGER_ARN,), f"ledger items of these kinds only: {_kinds_of(patterns)}",
                       leading_keys=patterns)
                 for actions, patterns in kind_sets(role_logical_id))
