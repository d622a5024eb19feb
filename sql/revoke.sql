-- revoke.sql -- removes the agent users (catalog.DB_USERS: one per Lambda that logs in to PostgreSQL).
-- Safe to run twice. The "derived" region is rewritten by `python -m infra.derived --write`.
--
-- Runs as the cluster's master, which on RDS/Aurora is NOT a superuser (LOGIN,
-- CREATEROLE, CREATEDB, member of rds_superuser). Two PostgreSQL rules apply:
--
-- * DROP OWNED BY u requires the privileges of u (measured: "permission denied to
--   drop objects" otherwise, on 15 as on 17). So the master first makes itself a
--   member of u: GRANT u TO current_user. The membership inherits by default (the
--   member's rolinherit, true for the master), and goes away with DROP USER.
-- * Since PostgreSQL 16 (Aurora PostgreSQL 17 included), a CREATEROLE role may
--   grant, alter or drop only roles on which it holds ADMIN OPTION; it receives
--   that automatically for the roles it creates (PostgreSQL 16 release notes,
--   "Restrict the privileges of CREATEROLE roles"; CREATE ROLE and
--   createrole_self_grant in the 16/17 manual). grants.sql creates the users as the
--   master, so the master holds ADMIN OPTION on them and both statements below are
--   allowed. On 15 (the local binaries) CREATEROLE alone allows them.
--
-- DROP OWNED revokes every privilege the users hold (they own nothing), so DROP
-- USER does not fail on "role ... cannot be dropped because some objects depend on it".
DO $$
DECLARE
    u text;
BEGIN
    -- Shared with grants.sql: concurrent runs wait for each other.
    PERFORM pg_advisory_xact_lock(hashtext('cadencia: sql/grants.sql, sql/revoke.sql'));
    FOREACH u IN ARRAY ARRAY[
        -- derived:db-users start (catalog.DB_USERS: each one dropped)
        'cadencia_agente_consulta', 'cadencia_agente_reembolso', 'cadencia_agente_cadastro',
        'cadencia_agente_conciliacao', 'cadencia_canal_whatsapp'
        -- derived:db-users end
    ] LOOP
        IF EXISTS (SELECT FROM pg_roles WHERE rolname = u) THEN
            IF NOT pg_has_role(current_user, u, 'USAGE') THEN
                EXECUTE format('GRANT %I TO %I', u, current_user);
            END IF;
            EXECUTE format('DROP OWNED BY %I', u);
            EXECUTE format('DROP USER %I', u);
        END IF;
    END LOOP;
END
$$;
