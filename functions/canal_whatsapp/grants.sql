-- cadencia_canal_whatsapp (WhatsApp channel): which customer a number belongs to,
-- nothing else (no name, no telefone, no other table): wa_id for the WHERE clause,
-- cliente_id to answer.
GRANT SELECT (wa_id, cliente_id) ON canais_whatsapp TO cadencia_canal_whatsapp;
