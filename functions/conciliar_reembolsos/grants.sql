-- cadencia_agente_conciliacao (reconciler, cadencia-conciliar-reembolsos): settles the
-- refund tool's own reservations once the gateway has answered -- the same statements
-- as the refund tool's settle step (emitir_reembolso.repository.RefundOrders: lock the
-- order row, mark a key executed and add it to the order, or release it), nothing else.
-- No cliente_id: it never decides whose order it is, only what the gateway said about a key.
-- SELECT (atualizado_em): the books' audit frees a reservation no claim holds only when it
-- is older than the claim's lease (conciliar_reembolsos/books.py).
GRANT SELECT (id, valor_pedido, valor_reembolsado) ON pedidos TO cadencia_agente_conciliacao;
GRANT UPDATE (status_reembolso, valor_reembolsado) ON pedidos TO cadencia_agente_conciliacao;
GRANT SELECT (chave_idempotencia, pedido_id, valor, status, atualizado_em) ON reembolsos TO cadencia_agente_conciliacao;
GRANT INSERT (chave_idempotencia, pedido_id, valor, status) ON reembolsos TO cadencia_agente_conciliacao;
GRANT UPDATE (valor, status, atualizado_em) ON reembolsos TO cadencia_agente_conciliacao;
