-- revoke.sql -- removes the three agent users and the WhatsApp channel's user. Safe to run twice.
-- DROP OWNED revokes every privilege they hold (they own nothing), so DROP USER
-- does not fail on "role ... cannot be dropped because some objects depend on it".
DO $$
DECLARE
    u text;
BEGIN
    FOREACH u IN ARRAY ARRAY['cadencia_agente_consulta', 'cadencia_agente_reembolso', 'cadencia_agente_cadastro',
                             'cadencia_canal_whatsapp'] LOOP
        IF EXISTS (SELECT FROM pg_roles WHERE rolname = u) THEN
            EXECUTE format('DROP OWNED BY %I', u);
            EXECUTE format('DROP USER %I', u);
        END IF;
    END LOOP;
END
$$;
