-- grants.sql -- the second layer of least privilege, the one IAM cannot cover.
-- Each agent user's GRANTs are written in its package (functions/<package>/grants.sql);
-- the two "derived" regions below are rewritten from the tool registry by
-- `python -m infra.derived --write` (tests/test_derived_files.py fails when they are stale).
--
-- rds-db:connect restricts WHO may log in as which user; these GRANTs restrict
-- WHAT that user may do once logged in. Safe to run twice: users are created
-- when absent, every existing privilege of the agent users on the ERP tables is
-- revoked, and exactly the list below is granted again, so the catalog always
-- equals this file (tests/test_db_privileges.py reads it back).
--
-- Runs as the cluster's master, not a superuser (see revoke.sql for the
-- PostgreSQL 16+ CREATEROLE rules): the master creates the users, so it holds
-- ADMIN OPTION on them; it owns the tables (schema.sql), so it may grant on them;
-- RDS lets it grant rds_iam.

-- One statement (a single DO block, so one Data API call and one transaction):
-- a run killed midway leaves nothing half-granted, and the advisory lock, shared
-- with revoke.sql, makes concurrent runs (a deploy and scripts/grants.sh, say)
-- wait for each other instead of failing on "tuple concurrently updated".
DO $$
DECLARE
    u text;
    t text;
    cols text;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('cadencia: sql/grants.sql, sql/revoke.sql'));

    -- rds_iam exists on RDS/Aurora; a PostgreSQL without it gets an inert NOLOGIN
    -- role of that name, to keep this script identical in both places.
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rds_iam') THEN
        CREATE ROLE rds_iam NOLOGIN;
    END IF;

    FOREACH u IN ARRAY ARRAY[
        -- derived:db-users start (catalog.DB_USERS: created if absent, stripped, then granted below)
        'cadencia_agente_consulta', 'cadencia_agente_reembolso', 'cadencia_agente_cadastro',
        'cadencia_agente_conciliacao', 'cadencia_canal_whatsapp'
        -- derived:db-users end
    ] LOOP
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

    -- derived:grants start (each user's functions/<package>/grants.sql)
    -- cadencia_agente_consulta (status tool): SELECT on exactly the columns of pedidos
    -- its query reads (repository.py: the answer's columns, and cliente_id for the
    -- ownership check). Lab 87 granted SELECT on pedidos and clientes whole; the tool
    -- never reads clientes, and no agent user may read clientes.cpf, so it gets nothing there.
    GRANT SELECT (id, cliente_id, status, valor_pedido, status_reembolso, valor_reembolsado,
                  previsao_entrega, codigo_rastreio) ON pedidos TO cadencia_agente_consulta;

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

    -- cadencia_agente_cadastro (profile tool): only address and contact columns (Lab 87),
    -- plus SELECT (id): PostgreSQL requires SELECT on every column an UPDATE's WHERE clause reads.
    GRANT SELECT (id) ON clientes TO cadencia_agente_cadastro;
    GRANT UPDATE (endereco, telefone, email) ON clientes TO cadencia_agente_cadastro;

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

    -- cadencia_canal_whatsapp (WhatsApp channel): which customer a number belongs to,
    -- nothing else (no name, no telefone, no other table): wa_id for the WHERE clause,
    -- cliente_id to answer.
    GRANT SELECT (wa_id, cliente_id) ON canais_whatsapp TO cadencia_canal_whatsapp;
    -- derived:grants end
END
$$;
