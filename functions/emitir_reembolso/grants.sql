-- cadencia_agente_reembolso (refund tool): Lab 87's SELECT (id, valor_pedido) and
-- UPDATE (status_reembolso, valor_reembolsado) on pedidos, plus what exactly-once needs:
--   SELECT (cliente_id)          the tool must check the order is the customer's own;
--   SELECT (valor_reembolsado)   the balance check and the "valor_reembolsado + x" of
--                                its UPDATE read it;
--   reembolsos                   its own ledger of reservations (see sql/schema.sql): it
--                                reserves an amount before calling the gateway and
--                                settles it once. No DELETE: rows are never removed.
-- Its SELECT ... FOR UPDATE (the row lock that serializes refunds of one order)
-- needs UPDATE on some column of the row, which it has.
GRANT SELECT (id, cliente_id, valor_pedido, valor_reembolsado) ON pedidos TO cadencia_agente_reembolso;
GRANT UPDATE (status_reembolso, valor_reembolsado) ON pedidos TO cadencia_agente_reembolso;
GRANT SELECT (chave_idempotencia, pedido_id, valor, status) ON reembolsos TO cadencia_agente_reembolso;
GRANT INSERT (chave_idempotencia, pedido_id, valor, status) ON reembolsos TO cadencia_agente_reembolso;
GRANT UPDATE (valor, status, atualizado_em) ON reembolsos TO cadencia_agente_reembolso;
