"""A local consumer worker of the WhatsApp channel (its own OS process): what Lambda's
event source mappings do for ``orchestrator.whatsapp_consumer.lambda_handler``, for the
inbound FIFO queue and the resend queue, one message at a time (batch size 1).

A message is deleted when its record succeeded; otherwise it is made visible again
after the derived redelivery delay (``canal_whatsapp.queue_timing``), and what the
worker caught is logged (type and place, never text that may be personal).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from .aws import session_client
from .whatsapp_channel import TURN_TIMEOUT_S, local_timing


def sqs_event(message: dict[str, Any], queue_arn: str) -> dict[str, Any]:
    return {"Records": [{
        "messageId": message["MessageId"], "receiptHandle": message["ReceiptHandle"], "body": message["Body"],
        "attributes": message.get("Attributes", {}), "messageAttributes": {}, "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs", "eventSourceARN": queue_arn, "awsRegion": "us-east-1",
    }]}


def run_consumer(queue_url: str, resend_url: str | None = None) -> None:
    """Poll the inbound queue and, between two polls, the resend queue (Lambda's two
    event source mappings of the same function)."""
    from orchestrator.invokers.local import LocalContext
    from orchestrator.whatsapp_consumer import lambda_handler

    sqs = session_client("sqs", os.environ["AWS_ENDPOINT_URL"])
    queues = [(url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"],
               wait_s) for url, wait_s in ((queue_url, 1), (resend_url, 0)) if url]
    turn_timeout_s = int(os.environ.get("LOCAL_TURN_TIMEOUT_S", TURN_TIMEOUT_S))
    retry_after_s = int(os.environ.get("LOCAL_RETRY_AFTER_S", local_timing().redelivery_s))
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    while not stop:
        for url, arn, wait_s in queues:
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, WaitTimeSeconds=wait_s,
                                      AttributeNames=["All"]).get("Messages", [])
            for message in got:
                try:
                    result = lambda_handler(sqs_event(message, arn),
                                            LocalContext("cadencia-orquestrador", timeout_s=turn_timeout_s))
                    failed = bool(result.get("batchItemFailures"))
                except Exception as err:  # a failed invocation: the whole batch comes back
                    _log_caught(err, message)
                    failed = True
                if not failed:
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                else:
                    _log_failed(message, retry_after_s)
                    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"],
                                                  VisibilityTimeout=retry_after_s)


def _log_caught(err: BaseException, message: dict[str, Any]) -> None:
    """What the worker caught, as Lambda's log would show a failed invocation: the
    exception's type and where it was raised (never its text nor the body, which may
    hold a phone number or the customer's words)."""
    import traceback

    frames = traceback.extract_tb(err.__traceback__)[-3:]
    where = " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in reversed(frames))
    print(json.dumps({"level": "ERROR", "message": "invocacao falhou", "erro": type(err).__name__, "onde": where,
                      "messageId": message["MessageId"]}), flush=True)


def _log_failed(message: dict[str, Any], retry_after_s: int) -> None:
    receives = message.get("Attributes", {}).get("ApproximateReceiveCount", "?")
    print(json.dumps({"level": "WARNING", "message": "registro falhou: volta a fila", "messageId": message["MessageId"],
                      "recebimentos": receives, "voltaEmS": retry_after_s}), flush=True)
