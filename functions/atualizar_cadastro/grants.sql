-- cadencia_agente_cadastro (profile tool): only address and contact columns (Lab 87),
-- plus SELECT (id): PostgreSQL requires SELECT on every column an UPDATE's WHERE clause reads.
GRANT SELECT (id) ON clientes TO cadencia_agente_cadastro;
GRANT UPDATE (endereco, telefone, email) ON clientes TO cadencia_agente_cadastro;
