"""Lab 87's production design (reference 001), written only for the comparison.

Faithful to the reference's code, with its one invalid call made valid:

- the orchestrator's ceiling is count-then-act: a ``Query`` counts the attempts
  of (conversaId, pedidoId, ferramenta); 4 or more -> refuse and ``PutMetricData``
  ``InterrupcoesPorTeto{Ferramenta}``; otherwise the tool runs and the attempt is
  written (``PutItem``, no condition: Lab 87 has none) as its ledger event
  ``TENTATIVA_DE_FERRAMENTA_REGISTRADA``. Lab 87's ``begins_with`` on the hash key
  is rejected by DynamoDB; the valid equivalent used here keys attempts by
  ``{conversaId}#{pedidoId}#{ferramenta}`` (hash) + the attempt number (range),
  and the Query is ``prefixo = :prefixo`` (eventually consistent, as in the C#);
- the refund claims ``{conversaId}#{pedidoId}#reembolso`` with a conditional
  ``PutItem`` (attribute_not_exists), then reads the gateway secret on every call
  (``GetSecretValue``, no cache), calls the gateway with ``Idempotency-Key`` and
  writes the result (``UpdateItem``); a failed claim answers "já processado"
  (even when the first call's gateway request failed: one of its gaps);
- the status tool runs one SELECT as ``cadencia_agente_consulta`` (one command,
  no explicit transaction);
- no conversation state, no audit chain, no lease: AgentCore keeps the
  conversation, outside this table. Its handlers log nothing of their own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import psycopg

from emitir_reembolso.gateway import PaymentGatewayClient
from scripts.harness.minimal import _now  # Lab 87's timestamp format, as its minimal design writes it

TABLE = "lab87-execucoes"
CEILING = 4
SECRET_NAME_DEFAULT = "cadencia/gateway-pagamento"


def table_definition() -> dict[str, Any]:
    return {
        "TableName": TABLE,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": "prefixo", "AttributeType": "S"},
                                 {"AttributeName": "tentativa", "AttributeType": "N"}],
        "KeySchema": [{"AttributeName": "prefixo", "KeyType": "HASH"},
                      {"AttributeName": "tentativa", "KeyType": "RANGE"}],
    }


@dataclass
class Lab87Gate:
    """OrquestradorDoLaco.cs: AvaliarProximaChamadaAsync + the attempt record."""

    dynamodb: Any
    cloudwatch: Any

    def evaluate(self, conversa_id: str, ferramenta: str, pedido_id: str) -> int | None:
        """The attempt number when allowed, None when refused by the ceiling."""
        prefixo = f"{conversa_id}#{pedido_id}#{ferramenta}"
        found = self.dynamodb.query(TableName=TABLE, KeyConditionExpression="prefixo = :p",
                                    ExpressionAttributeValues={":p": {"S": prefixo}})
        if found["Count"] >= CEILING:
            self.cloudwatch.put_metric_data(Namespace="Cadencia/AgenteAtendimento", MetricData=[{
                "MetricName": "InterrupcoesPorTeto", "Value": 1,
                "Dimensions": [{"Name": "Ferramenta", "Value": ferramenta}]}])
            return None
        return found["Count"] + 1

    def record(self, conversa_id: str, ferramenta: str, pedido_id: str, numero: int, resultado: str) -> None:
        self.dynamodb.put_item(TableName=TABLE, Item={
            "prefixo": {"S": f"{conversa_id}#{pedido_id}#{ferramenta}"}, "tentativa": {"N": str(numero)},
            "evento": {"S": "TENTATIVA_DE_FERRAMENTA_REGISTRADA"}, "timestamp": {"S": _now()},
            "conversaId": {"S": conversa_id}, "pedidoId": {"S": pedido_id}, "ferramenta": {"S": ferramenta},
            "tentativaNumero": {"N": str(numero)}, "resultado": {"S": resultado},
            "chaveIdempotencia": {"S": f"{conversa_id}#{pedido_id}#reembolso"},
        })


@dataclass
class Lab87Refund:
    """EmitirReembolso.cs."""

    dynamodb: Any
    secrets: Any
    gateway: PaymentGatewayClient
    secret_name: str = SECRET_NAME_DEFAULT

    def execute(self, conversa_id: str, pedido_id: str, valor: Decimal) -> dict[str, Any]:
        chave = f"{conversa_id}#{pedido_id}#reembolso"
        try:
            self.dynamodb.put_item(
                TableName=TABLE,
                Item={"prefixo": {"S": chave}, "tentativa": {"N": "0"}, "status": {"S": "tentando"},
                      "timestamp": {"S": _now()}},
                ConditionExpression="attribute_not_exists(prefixo)")
        except self.dynamodb.exceptions.ConditionalCheckFailedException:
            return {"resultado": "bloqueado_por_idempotencia",
                    "mensagem": f"O reembolso do pedido {pedido_id} já foi processado nesta conversa."}
        token = json.loads(self.secrets.get_secret_value(SecretId=self.secret_name)["SecretString"])["token"]
        refund = self.gateway.refund(idempotency_key=chave, order_id=pedido_id, amount=valor, token=token)
        self.dynamodb.update_item(
            TableName=TABLE, Key={"prefixo": {"S": chave}, "tentativa": {"N": "0"}},
            UpdateExpression="SET #s = :s, transacao = :t",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":s": {"S": refund.status}, ":t": {"S": refund.transaction_id or "-"}})
        return {"resultado": "executado", "transacao": refund.transaction_id}


def lab87_status(conn: psycopg.Connection, pedido_id: str, cliente_id: int) -> dict[str, Any] | None:
    """The status tool: one SELECT on an autocommit connection."""
    row = conn.execute(
        "SELECT id, status, valor_pedido, status_reembolso, valor_reembolsado, previsao_entrega, codigo_rastreio "
        "FROM pedidos WHERE id = %s AND cliente_id = %s", (pedido_id, cliente_id)).fetchone()
    return None if row is None else {"pedidoId": row[0], "status": row[1]}


@dataclass
class Lab87Turn:
    """One customer message in Lab 87: the model's tool calls (the same scripted
    calls as this project's turn), each through the gate, the tool and the record.
    The model itself runs in AgentCore and is not counted by either design."""

    gate: Lab87Gate
    refund: Lab87Refund
    status_conn: psycopg.Connection
    invocations: list[str]

    def run(self, conversa_id: str, cliente_id: int, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
        results = []
        for ferramenta, entrada in calls:
            pedido_id = entrada["pedidoId"]
            numero = self.gate.evaluate(conversa_id, ferramenta, pedido_id)
            if numero is None:
                results.append("bloqueado_por_teto")
                break  # Lab 87 hands the conversation to a person
            self.invocations.append(ferramenta)
            if ferramenta == "emitir_reembolso":
                answer = self.refund.execute(conversa_id, pedido_id, Decimal(str(entrada["valor"])))
                resultado = answer["resultado"]
            else:
                resultado = "executado" if lab87_status(self.status_conn, pedido_id, cliente_id) else "recusado"
            self.gate.record(conversa_id, ferramenta, pedido_id, numero, resultado)
            results.append(resultado)
        return results
