-- demo.sql -- a few customers and orders for the local proof. Safe to run twice:
-- rows are upserted back to their initial state (refund columns included).
INSERT INTO clientes (id, nome, cpf, endereco, telefone, email) VALUES
    (1001, 'Ana Souza',      '111.111.111-11', 'Rua das Flores, 10, São Paulo - SP', '+5511987654321', 'ana@example.com'),
    (1002, 'Bruno Lima',     '222.222.222-22', 'Av. Atlântica, 200, Rio de Janeiro - RJ', '+5521998765432', 'bruno@example.com'),
    (1003, 'Carla Mendes',   '333.333.333-33', 'Rua XV de Novembro, 5, Curitiba - PR', '+5541991234567', 'carla@example.com')
ON CONFLICT (id) DO UPDATE
    SET nome = EXCLUDED.nome, cpf = EXCLUDED.cpf, endereco = EXCLUDED.endereco,
        telefone = EXCLUDED.telefone, email = EXCLUDED.email;

-- Reservations of earlier runs go first (they reference the orders).
DELETE FROM reembolsos WHERE pedido_id IN ('4821', '4822', '5100', '6200');

INSERT INTO pedidos (id, cliente_id, status, valor_pedido, previsao_entrega, codigo_rastreio) VALUES
    ('4821', 1001, 'entregue', 189.90, DATE '2026-08-05', 'BR123456789'),
    ('4822', 1001, 'enviado',   59.00, DATE '2026-08-12', 'BR987654321'),
    ('5100', 1002, 'pago',     320.00, DATE '2026-08-15', NULL),
    ('6200', 1003, 'entregue',  75.50, DATE '2026-08-01', 'BR555000111')
ON CONFLICT (id) DO UPDATE
    SET cliente_id = EXCLUDED.cliente_id, status = EXCLUDED.status, valor_pedido = EXCLUDED.valor_pedido,
        previsao_entrega = EXCLUDED.previsao_entrega, codigo_rastreio = EXCLUDED.codigo_rastreio,
        status_reembolso = 'nenhum', valor_reembolsado = 0;

-- The demo customers' WhatsApp numbers (wa_id: digits only, as the Cloud API sends them).
INSERT INTO canais_whatsapp (wa_id, cliente_id) VALUES
    ('5511987654321', 1001),
    ('5521998765432', 1002),
    ('5541991234567', 1003)
ON CONFLICT (wa_id) DO UPDATE SET cliente_id = EXCLUDED.cliente_id;
