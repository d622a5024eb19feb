-- schema.sql -- the ERP tables the agent's tools touch (Lab 87's names).
-- Safe to run twice: every object is created only when absent.

CREATE TABLE IF NOT EXISTS clientes (
    id            bigint PRIMARY KEY,
    nome          text NOT NULL,
    cpf           text,                 -- never granted to any agent user
    endereco      text,
    telefone      text,
    email         text,
    criado_em     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS pedidos (
    id                      text PRIMARY KEY,
    cliente_id              bigint NOT NULL REFERENCES clientes (id),
    status                  text NOT NULL
                            CHECK (status IN ('aguardando_pagamento', 'pago', 'enviado', 'entregue', 'cancelado')),
    valor_pedido            numeric(12, 2) NOT NULL CHECK (valor_pedido > 0),
    status_reembolso        text NOT NULL DEFAULT 'nenhum'
                            CHECK (status_reembolso IN ('nenhum', 'reembolsado_parcial', 'reembolsado')),
    valor_reembolsado       numeric(12, 2) NOT NULL DEFAULT 0
                            CHECK (valor_reembolsado >= 0 AND valor_reembolsado <= valor_pedido),
    -- Idempotency key of the last refund applied to this row: makes the refund
    -- tool's ERP write safe to repeat after a crash (see grants.sql).
    chave_ultimo_reembolso  text,
    previsao_entrega        date,
    codigo_rastreio         text,
    criado_em               timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS pedidos_cliente_id_idx ON pedidos (cliente_id);
