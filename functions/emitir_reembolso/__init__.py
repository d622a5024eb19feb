"""``emitir_reembolso``: the irreversible tool. Exactly-once by construction:
claim the idempotency key (conditional PutItem) -> only then read the gateway
secret -> debit with ``Idempotency-Key`` -> record the outcome."""
