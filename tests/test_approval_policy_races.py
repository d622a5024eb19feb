"""The two-person rule under racing callers: threads deciding at once through the policy
(each its own boto3 client, the local stack's serialized DynamoDB). One person twice at
once never approves; two people at once approve exactly once."""

from __future__ import annotations

import threading
from decimal import Decimal

from cadencia_shared import approval_policy
from cadencia_shared.approvals import ApprovalStatus, ApprovalStore, DecisionRefused
from cadencia_shared.identity import APPROVERS, Person
from cadencia_shared.ledger import Ledger
from scripts.local_stack.aws import session_client

from .test_operator_api import POLICY, _waiting

SETTINGS = approval_policy.PolicySettings(APROVACAO_DUPLA_ACIMA_REAIS=Decimal("150"))


def _race(local_stack, approval: str, people: list[Person]) -> list[str]:
    outcomes: list[str] = []
    barrier = threading.Barrier(len(people))

    def one(person: Person) -> None:
        ledger = Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))
        barrier.wait()
        try:
            decided = approval_policy.decide(ledger, approval, person=person, approve=True, justification="conferido",
                                             approved_amount=None, settings=SETTINGS)
            outcomes.append(decided.outcome)
        except DecisionRefused as refused:
            outcomes.append(refused.reason)

    threads = [threading.Thread(target=one, args=(p,)) for p in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(outcomes)


def _person(name: str) -> Person:
    return Person(subject=name, name=name, groups=frozenset({APPROVERS}))


def test_one_person_racing_themselves_never_approves(local_stack, erp):
    for _ in range(3):
        _, approval = _waiting(local_stack, 189.9, policy=POLICY)
        outcomes = _race(local_stack, approval, [_person("ana")] * 4)
        assert set(outcomes) == {approval_policy.AWAITING_SECOND}, outcomes
        ledger = Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))
        assert ApprovalStore(ledger).get(approval).status is ApprovalStatus.PENDING


def test_two_people_at_once_approve_exactly_once(local_stack, erp):
    for _ in range(3):
        _, approval = _waiting(local_stack, 189.9, policy=POLICY)
        outcomes = _race(local_stack, approval, [_person("ana"), _person("bruno")])
        assert outcomes.count("aprovada") == 1, outcomes
        ledger = Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))
        assert ApprovalStore(ledger).get(approval).status is ApprovalStatus.APPROVED
