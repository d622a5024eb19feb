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
    previsao_entrega        date,
    codigo_rastreio         text,
    criado_em               timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS pedidos_cliente_id_idx ON pedidos (cliente_id);

-- One row per refund the agent attempted, keyed by its idempotency key
-- ({conversaId}#{pedidoId}#reembolso). A refund is *reserved* here, in the same
-- transaction that checks the order's balance and under the order's row lock,
-- before the gateway is called; so an outcome that is still unknown (a timeout,
-- a crash) keeps holding its amount, and no other conversation can refund the
-- same money again. It becomes *executado* exactly once (that transition is what
-- adds the amount to pedidos.valor_reembolsado), or *liberado* when nothing was
-- debited.
CREATE TABLE IF NOT EXISTS reembolsos (
    chave_idempotencia  text PRIMARY KEY,
    pedido_id           text NOT NULL REFERENCES pedidos (id),
    valor               numeric(12, 2) NOT NULL CHECK (valor > 0),
    status              text NOT NULL CHECK (status IN ('reservado', 'executado', 'liberado')),
    criado_em           timestamptz NOT NULL DEFAULT now(),
    atualizado_em       timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS reembolsos_pedido_id_idx ON reembolsos (pedido_id);

-- Which WhatsApp number (wa_id, digits only) belongs to which customer. Written by
-- the ERP's account flow when a customer links a number; read only by the WhatsApp
-- channel (cadencia_canal_whatsapp). Kept apart from clientes.telefone on purpose:
-- the profile tool may change telefone on a customer's request, and the identity
-- the channel binds must never be something a conversation can rewrite.
CREATE TABLE IF NOT EXISTS canais_whatsapp (
    wa_id         text PRIMARY KEY CHECK (wa_id ~ '^[0-9]{6,20}$'),
    cliente_id    bigint NOT NULL REFERENCES clientes (id),
    vinculado_em  timestamptz NOT NULL DEFAULT now()
);
