-- grants.sql -- the second layer of least privilege, the one IAM cannot cover.
-- rds-db:connect restricts WHO may log in as which user; these GRANTs restrict
-- WHAT that user may do once logged in. Safe to run twice: users are created
-- when absent, every existing privilege of the three users on the ERP tables is
-- revoked, and exactly the list below is granted again, so the catalog always
-- equals this file (tests/test_db_privileges.py reads it back).

-- rds_iam exists on RDS/Aurora; a local PostgreSQL lacks it, so create an inert
-- NOLOGIN role of that name to keep this script identical in both places.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rds_iam') THEN
        CREATE ROLE rds_iam NOLOGIN;
    END IF;
END
$$;

DO $$
DECLARE
    u text;
    t text;
    cols text;
BEGIN
    FOREACH u IN ARRAY ARRAY['cadencia_agente_consulta', 'cadencia_agente_reembolso', 'cadencia_agente_cadastro',
                             'cadencia_canal_whatsapp'] LOOP
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = u) THEN
            EXECUTE format('CREATE USER %I WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE', u);
        END IF;
        EXECUTE format('GRANT rds_iam TO %I', u);
        -- Start from nothing: table-level privileges ...
        EXECUTE format('REVOKE ALL ON TABLE clientes, pedidos, reembolsos, canais_whatsapp FROM %I', u);
        -- ... and column-level ones, which REVOKE ALL ON TABLE leaves in place.
        FOR t, cols IN
            SELECT table_name, string_agg(quote_ident(column_name), ', ')
              FROM information_schema.columns
             WHERE table_schema = current_schema()
               AND table_name IN ('clientes', 'pedidos', 'reembolsos', 'canais_whatsapp')
             GROUP BY table_name
        LOOP
            EXECUTE format('REVOKE ALL (%s) ON TABLE %I FROM %I', cols, t, u);
        END LOOP;
    END LOOP;
END
$$;

-- Status tool: SELECT, nothing more (Lab 87).
GRANT SELECT ON pedidos, clientes TO cadencia_agente_consulta;

-- Refund tool: Lab 87's SELECT (id, valor_pedido) and UPDATE (status_reembolso,
-- valor_reembolsado) on pedidos, plus what exactly-once needs:
--   SELECT (cliente_id)          the tool must check the order is the customer's own;
--   SELECT (valor_reembolsado)   the balance check and the "valor_reembolsado + x" of
--                                its UPDATE read it;
--   reembolsos                   its own ledger of reservations (see schema.sql): it
--                                reserves an amount before calling the gateway and
--                                settles it once. No DELETE: rows are never removed.
-- Its SELECT ... FOR UPDATE (the row lock that serializes refunds of one order)
-- needs UPDATE on some column of the row, which it has.
GRANT SELECT (id, cliente_id, valor_pedido, valor_reembolsado) ON pedidos TO cadencia_agente_reembolso;
GRANT UPDATE (status_reembolso, valor_reembolsado) ON pedidos TO cadencia_agente_reembolso;
GRANT SELECT (chave_idempotencia, pedido_id, valor, status) ON reembolsos TO cadencia_agente_reembolso;
GRANT INSERT (chave_idempotencia, pedido_id, valor, status) ON reembolsos TO cadencia_agente_reembolso;
GRANT UPDATE (valor, status, atualizado_em) ON reembolsos TO cadencia_agente_reembolso;

-- Profile tool: only address and contact columns (Lab 87), plus SELECT (id):
-- PostgreSQL requires SELECT on every column an UPDATE's WHERE clause reads.
GRANT SELECT (id) ON clientes TO cadencia_agente_cadastro;
GRANT UPDATE (endereco, telefone, email) ON clientes TO cadencia_agente_cadastro;

-- WhatsApp channel: which customer a number belongs to, nothing else (no name,
-- no telefone, no other table): wa_id for the WHERE clause, cliente_id to answer.
GRANT SELECT (wa_id, cliente_id) ON canais_whatsapp TO cadencia_canal_whatsapp;
