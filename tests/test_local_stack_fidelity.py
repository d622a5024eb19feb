"""Where the local moto server must behave like AWS for the channel's guarantees to be
tested (scripts/local_stack/aws.py, SerializedWsgi):

- TransactWriteItems honours ClientRequestToken (moto alone ignores it): a retried
  transaction that was already applied succeeds without applying twice, as botocore's
  retries expect from DynamoDB;
- an SQS long poll does not hold the server's one lock: an idle consumer's poll never
  delays a DynamoDB write (it used to, by its whole wait: 6 idle 1-second polls made a
  PutItem wait 5.2 s on average, past the clients' 5 s read timeout — the cause of the
  four-process race's ``turnos == 2``)."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from scripts.local_stack.aws import session_client

pytestmark = pytest.mark.stack


def _bump(table: str, pk: str, token: str, *, by: int = 1) -> dict:
    return {"TransactItems": [{"Update": {
        "TableName": table, "Key": {"pk": {"S": pk}}, "UpdateExpression": "ADD n :by SET v = :v",
        "ConditionExpression": "attribute_not_exists(v) OR v < :v",
        "ExpressionAttributeValues": {":by": {"N": str(by)}, ":v": {"N": "1"}}}}], "ClientRequestToken": token}


def test_a_retried_transaction_with_its_token_is_applied_once(local_stack):
    ddb = session_client("dynamodb", local_stack.aws_endpoint)
    pk, token = f"teste-token#{uuid.uuid4().hex}", uuid.uuid4().hex
    ddb.transact_write_items(**_bump(local_stack.ledger_table, pk, token))
    # The retry of the same call: its condition no longer holds, yet, as in DynamoDB, it succeeds and changes nothing.
    ddb.transact_write_items(**_bump(local_stack.ledger_table, pk, token))
    item = ddb.get_item(TableName=local_stack.ledger_table, Key={"pk": {"S": pk}}, ConsistentRead=True)["Item"]
    assert item["n"] == {"N": "1"}
    # Without the token's protection (a new call), the condition is evaluated again.
    with pytest.raises(ClientError) as failed:
        ddb.transact_write_items(**_bump(local_stack.ledger_table, pk, uuid.uuid4().hex))
    assert failed.value.response["Error"]["Code"] == "TransactionCanceledException"


def test_the_same_token_with_other_parameters_is_refused(local_stack):
    ddb = session_client("dynamodb", local_stack.aws_endpoint)
    pk, token = f"teste-token#{uuid.uuid4().hex}", uuid.uuid4().hex
    ddb.transact_write_items(**_bump(local_stack.ledger_table, pk, token))
    with pytest.raises(ClientError) as refused:
        ddb.transact_write_items(**_bump(local_stack.ledger_table, pk, token, by=5))
    assert refused.value.response["Error"]["Code"] == "IdempotentParameterMismatchException"
    item = ddb.get_item(TableName=local_stack.ledger_table, Key={"pk": {"S": pk}}, ConsistentRead=True)["Item"]
    assert item["n"] == {"N": "1"}


def test_an_idle_long_poll_does_not_hold_up_other_requests(local_stack):
    sqs = session_client("sqs", local_stack.aws_endpoint)
    ddb = session_client("dynamodb", local_stack.aws_endpoint)
    queue = sqs.create_queue(QueueName=f"poll-{uuid.uuid4().hex[:8]}.fifo",
                             Attributes={"FifoQueue": "true"})["QueueUrl"]
    polled: list[dict] = []
    poll = threading.Thread(target=lambda: polled.append(sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=4)))
    try:
        poll.start()
        time.sleep(0.3)  # the poll is waiting on the empty queue
        ddb.put_item(TableName=local_stack.ledger_table, Item={"pk": {"S": f"teste-poll#{uuid.uuid4().hex}"}})
        assert poll.is_alive(), "the write waited for the long poll to end"
        # A message sent during the poll is still delivered by it (long-poll semantics kept).
        sqs.send_message(QueueUrl=queue, MessageBody="oi", MessageGroupId="g", MessageDeduplicationId="d")
        poll.join(10)
        assert [m["Body"] for m in polled[0].get("Messages", [])] == ["oi"]
    finally:
        poll.join(10)
        sqs.delete_queue(QueueUrl=queue)
