"""Sending one reply exactly once (logic; the Graph client and the outbox are passed in).

    record (pendente, once) ─► claim (conditional) ─► POST /{phone-number-id}/messages
        sent                 → enviado (Meta's wamid kept)
        not sent, temporary  → tentar_de_novo, back off, claim again (bounded)
            attempts used up → tentar_de_novo, resent later through the resend queue
                               (canal_whatsapp.resends) until the 24 h window closes
        not sent, final / window closed → falhou             + metric (alarm)
        no answer (timeout)  → desconhecido, never re-sent   + metric (alarm)
        131047 (24 h window) → fora_da_janela, handed off    + metric (alarm) + audit

Outside the 24-hour window a free-form text cannot go out. This project hands the
conversation's reply to a person (the alarm and the audit record) instead of sending
a template: a template needs one approved by Meta per business and language, which a
reference deployment cannot assume.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.utilities.parameters import SecretsProvider

from cadencia_shared.observability import count, seconds

from .graph import GraphClient, NotSent, OutsideServiceWindow, SendOutcomeUnknown, TextReply
from .outbox import FAILED_SENDS_METRIC, Outbox, OutboxStatus, OutgoingReply, SendClaim
from .resends import DEFERRED_METRIC, UNSENT_AGE_METRIC, ResendQueue, SqsResendQueue, delay_s
from .settings import SenderSettings

ACCESS_TOKEN_MAX_AGE_S = 300  # a rotated access token is picked up within five minutes


class NoTimeToSend(Exception):
    """Too little time left in this invocation to finish one send: nothing was
    claimed, so a later invocation (the message's redelivery) sends it."""


class SendInProgress(Exception):
    """Another sender holds this reply's record (``enviando``, lease not expired):
    the message is retried later, when the record is final or the lease expired
    (then ``desconhecido``, alarmed): never left unresolved, never sent twice."""


class DeliveryMetric:
    SENT = "RespostasWhatsappEnviadas"
    FAILED = FAILED_SENDS_METRIC  # {Motivo}: alarmed


@dataclass
class Sender:
    outbox: Outbox
    graph: GraphClient
    access_token: Callable[[], str]
    attempts: int = 3
    backoff_base_s: float = 0.5
    lease_s: int = 60
    send_timeout_s: float = 5.0
    sleep: Callable[[float], None] = time.sleep
    # Where a reply goes when the quick attempts are used up on a temporary refusal
    # (None: nowhere, the reply is falhou — a person's reply, which the person re-runs).
    resends: ResendQueue | None = None
    resend_base_s: int = 30

    @classmethod
    def configured(cls, outbox: Outbox, settings: SenderSettings, secrets_client: Any,
                   sqs_client: Any = None) -> Sender:
        """The sender every caller uses (the queue consumer, a person's reply): one
        configuration, one path to the Cloud API."""
        secrets = SecretsProvider(boto3_client=secrets_client)
        resends = (SqsResendQueue(sqs_client, settings.resend_queue_url)
                   if settings.resend_queue_url and sqs_client is not None else None)
        return cls(
            resends=resends, resend_base_s=settings.resend_base_s,
            outbox=outbox, graph=GraphClient(settings.graph_base_url, settings.send_timeout_s),
            access_token=lambda: str(secrets.get(settings.access_token_name,
                                                 max_age=ACCESS_TOKEN_MAX_AGE_S) or "").strip(),
            attempts=settings.send_attempts, backoff_base_s=settings.backoff_base_s,
            send_timeout_s=settings.send_timeout_s,
            # The lease outlives one send (its timeout) by a margin.
            lease_s=max(settings.send_lease_s, int(settings.send_timeout_s) + 2),
        )

    def deliver(self, reply: OutgoingReply, *, time_left_s: Callable[[], float] | None = None) -> OutboxStatus:
        """Make sure ``reply`` is sent at most once; returns the record's status.

        ``time_left_s`` is the invocation's remaining time: a send is never started
        that the function's timeout could cut (a cut send is an unknown outcome)."""
        # Read before anything is claimed: a secret outage must leave the record sendable.
        token = self.access_token()
        self.outbox.record(reply)
        return self._send_record(reply.key, token, time_left_s) or OutboxStatus.UNKNOWN

    def deliver_recorded(self, key: str, *, time_left_s: Callable[[], float] | None = None
                         ) -> OutboxStatus | None:
        """Send the outbox record ``key`` as written (its recipient, text and quote): a
        record still ``pendente`` or ``tentar_de_novo`` is sent now, at most once, one
        sent, being sent or final is left alone. Returns the record's status; None: no
        such record (nothing is sent). What the claim returns is what is sent, so the
        record is not read first — except when the token cannot be had: then a key with
        no record is still nothing to send (None, as when the consumer read the record
        first), and only a record that exists fails the redelivery (left unclaimed)."""
        try:
            token = self.access_token()  # before anything is claimed, as ``deliver``
        except Exception:
            if self.outbox.status(key) is None:
                return None
            raise
        return self._send_record(key, token, time_left_s)

    def _send_record(self, key: str, token: str, time_left_s: Callable[[], float] | None) -> OutboxStatus | None:
        while True:
            if time_left_s is not None and time_left_s() < self.send_timeout_s + 1:
                raise NoTimeToSend(key)
            claim = self.outbox.claim(key, lease_s=self.lease_s)
            if claim is None:  # sent, being sent, final or absent: nothing to send from here
                current = self.outbox.status(key)
                if current is OutboxStatus.SENDING:
                    raise SendInProgress(key)
                return current
            status = self._attempt(claim, token)
            if status is not OutboxStatus.RETRY or claim.attempt >= self.attempts:
                return status  # RETRY here: deferred to the resend queue
            self.sleep(self.backoff_base_s * 2 ** (claim.attempt - 1))

    def _attempt(self, claim: SendClaim, token: str) -> OutboxStatus:
        r = claim.reply
        try:
            wamid = self.graph.send_text(
                TextReply(phone_number_id=r.phone_number_id, to=r.to, body=r.body, reply_to=r.reply_to),
                token,
            )
        except OutsideServiceWindow:
            return self._final(claim, OutboxStatus.OUTSIDE_WINDOW, "131047", "fora_da_janela")
        except SendOutcomeUnknown:
            return self._final(claim, OutboxStatus.UNKNOWN, None, "sem_resposta")
        except NotSent as err:
            detail = f"http {err.status} codigo {err.code}"
            if not err.retryable:
                return self._final(claim, OutboxStatus.FAILED, detail, "recusado")
            if claim.attempt < self.attempts:
                self.outbox.finish(claim, OutboxStatus.RETRY, detail=detail)
                return OutboxStatus.RETRY
            return self._defer(claim, detail)
        self.outbox.finish(claim, OutboxStatus.SENT, detail=wamid)
        count(DeliveryMetric.SENT, {})
        return OutboxStatus.SENT

    def _defer(self, claim: SendClaim, detail: str) -> OutboxStatus:
        """The quick attempts are used up on a temporary refusal: resend later, while
        the customer's window is open; the record stays sendable (``tentar_de_novo``)."""
        window_ends_ms = claim.reply.window_ends_ms
        if self.resends is None or window_ends_ms is None or claim.created_ms is None:
            return self._final(claim, OutboxStatus.FAILED, detail, "tentativas")
        now_ms = self.outbox.table.now_ms()
        if now_ms >= window_ends_ms:
            return self._final(claim, OutboxStatus.FAILED, f"{detail}; janela de 24 h encerrada", "janela_encerrada")
        self.outbox.finish(claim, OutboxStatus.RETRY, detail=detail)
        deferrals = claim.attempt - self.attempts + 1
        wait_s = min(delay_s(deferrals, self.resend_base_s), max(0, (window_ends_ms - now_ms) // 1000))
        # A failed enqueue raises: the record is sendable and the caller's message comes back.
        self.resends.schedule(claim.key, wait_s)
        count(DEFERRED_METRIC, {})
        seconds(UNSENT_AGE_METRIC, (now_ms - claim.created_ms) / 1000)
        return OutboxStatus.RETRY

    def _final(self, claim: SendClaim, status: OutboxStatus, detail: str | None, reason: str) -> OutboxStatus:
        self.outbox.finish(claim, status, detail=detail)
        count(DeliveryMetric.FAILED, {"Motivo": reason})
        if status is OutboxStatus.OUTSIDE_WINDOW:
            self.outbox.ledger.append_audit(conversation_id=claim.reply.conversation_id,
                                            event="RESPOSTA_FORA_DA_JANELA",
                                            details={"mensagemId": claim.key})
        return status
