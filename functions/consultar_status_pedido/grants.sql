-- cadencia_agente_consulta (status tool): SELECT on exactly the columns of pedidos
-- its query reads (repository.py: the answer's columns, and cliente_id for the
-- ownership check). Lab 87 granted SELECT on pedidos and clientes whole; the tool
-- never reads clientes, and no agent user may read clientes.cpf, so it gets nothing there.
GRANT SELECT (id, cliente_id, status, valor_pedido, status_reembolso, valor_reembolsado,
              previsao_entrega, codigo_rastreio) ON pedidos TO cadencia_agente_consulta;
