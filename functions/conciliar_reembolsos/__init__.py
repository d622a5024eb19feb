"""``conciliar_reembolsos``: the scheduled reconciler. Finds refund claims not
settled with the gateway (unknown, or abandoned past their lease) and settles
them through the refund's own state machine — the same step a retry runs."""
