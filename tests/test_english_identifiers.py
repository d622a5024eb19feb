"""Python identifiers are English (DESIGN.md §6): Portuguese stays only
where Python meets a stored or wire name (an event's or a record's field, a tool's name,
a CLI's word the user sees) and in the text a customer reads.

An AST walk over every module of functions/, orchestrator/, infra/ and scripts/ looks at every name the code *defines* —
functions, classes, parameters, assignment targets, ``self.x =`` attributes, class-body
fields and argparse ``dest=`` — and splits it into words (snake_case and camelCase) against
a list of Portuguese words. Names merely *used* (``request.conversaId``, ``detalhe=`` in a
call) are the callee's: they are checked where they are defined. String contents are never
looked at. The allow-list names each wire field by module, so a new Portuguese variable
fails here, and an entry no longer needed fails too (the list can only shrink).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Every Python module of these trees is checked (tests/ is not: its names follow the code's).
CHECKED_DIRS = ("functions", "orchestrator", "infra", "scripts")

# Words a name must not use. "reais" is absent on purpose: it is the currency's name in English too.
PORTUGUESE = frozenset(["acao", "agora", "alvo", "antigo", "aprovacao", "aprovacoes", "aprovado", "aprovador", "aprovar", "arquitetura", "arquivo", "assunto", "atendente", "atraso", "ate", "atualizar", "auditoria", "bloqueio", "bloqueios", "cadastro", "caminho", "canal", "cenario", "cenarios", "chamada", "chamadas", "chave", "chaves", "cliente", "clientes", "codigo", "comando", "conciliacao", "conta", "contagem", "conversa", "conversas", "cortada", "dados", "debito", "debitos", "decisao", "decisoes", "detalhe", "detalhes", "devolver", "disjuntor", "dono", "duplicada", "duplicados", "emitir", "encerramento", "entrada", "envio", "erro", "erros", "espera", "estado", "evento", "eventos", "execucao", "execucoes", "expira", "falha", "falhas", "ferramenta", "ferramentas", "figuras", "grafico", "historico", "instancias", "interrompida", "janela", "justificativa", "limite", "linha", "linhas", "manter", "mensagem", "mensagens", "modelo", "modo", "motivo", "motivos", "negar", "numero", "operador", "pagamento", "pedido", "pedidos", "pela", "pessoa", "plataforma", "prazo", "provedor", "rapido", "reembolso", "reembolsos", "registro", "relatorio", "repetida", "resposta", "respostas", "resultado", "resultados", "roteiro", "rodada", "saida", "semente", "tentativa", "tentativas", "teto", "texto", "textos", "tipo", "valor", "valores", "vezes", "campo", "campos", "endereco", "telefone", "cancelar", "cancelamento", "prefixo", "consulta", "consultar", "enviar", "gravar", "buscar", "tabela", "usuario", "senha", "fila", "agente", "pendente", "nome"])  # noqa: E501 - one word list, kept on one line to diff

# Lab 87's external names (tool, Lambda and package names): an identifier spelling one is not Portuguese prose.
EXTERNAL_NAMES = ("consultar_status_pedido", "emitir_reembolso", "atualizar_cadastro", "conciliar_reembolsos",
                  "decidir_aprovacao", "canal_whatsapp")

# module -> names that are stored or wire names (each group says which wire it is).
ALLOWED: dict[str, frozenset[str]] = {
    # The scenario files (JSONL, documented in docs/prova.md) and their pydantic model.
    "scripts/harness/scenario.py": frozenset({"conversaId", "clienteId", "pedidoId", "valorPedido", "mensagens",
                                              "roteiro", "ferramenta", "entrada"}),
    # The harness's summary JSON (one object per conversation, dumped with asdict).
    "scripts/harness/records.py": frozenset({"conversaId", "pedidoId", "chamadasReembolso", "debitosReais",
                                             "interrompidaNoTeto", "cortadaPelaPlataforma", "encerramento"}),
    # The orchestrator's events (the channel's queue message, the resume and approval events).
    "orchestrator/events.py": frozenset({"conversaId", "clienteId", "mensagemId", "mensagem", "resposta", "motivo",
                                         "duplicada", "aprovacaoId", "acao"}),
    # The hand-off event on EventBridge (its detail's fields).
    "orchestrator/handoffs.py": frozenset({"conversaId", "motivo", "mensagemId", "tipo", "aprovacaoId",
                                           "ferramenta", "pedidoId", "valor", "expiraEmMs"}),
    # The person's-reply Lambda's event (cadencia-resposta-atendente).
    "orchestrator/human_reply.py": frozenset({"conversaId", "texto"}),
    # The operators' HTTP API bodies (POST .../respostas, POST .../decisao).
    "orchestrator/human_reply_api.py": frozenset({"texto"}),
    "functions/decidir_aprovacao/actions.py": frozenset({"decisao", "justificativa", "valorAprovado"}),
    "functions/decidir_aprovacao/switches_api.py": frozenset({"estado", "motivo"}),
    # The channel's queue message and webhook payload.
    "functions/canal_whatsapp/models.py": frozenset({"tipo", "mensagemId", "conversaId", "clienteId", "mensagem",
                                                     "motivo"}),
    # The tools' arguments (the JSON the model writes; the catalog's pydantic models of it).
    "functions/cadencia_shared/catalog.py": frozenset({"pedidoId", "valor", "campos", "endereco", "telefone"}),
    "functions/atualizar_cadastro/models.py": frozenset({"campos", "telefone"}),
    # The tool-call envelope every Lambda receives, and the approval Lambda's event.
    "functions/cadencia_shared/models.py": frozenset({"conversaId", "clienteId", "acao", "aprovacaoId", "decisao",
                                                      "aprovador", "justificativa"}),
    # The tools' answer: {"ferramenta", "ok", "resultado", "dados" | "erro": {"codigo", "mensagem", "detalhes"}}.
    "functions/cadencia_shared/results.py": frozenset({"ferramenta", "resultado", "dados", "erro", "codigo",
                                                       "mensagem", "detalhes"}),
    # perf2 branch owns; rename after merge (Lab 87's C# replica: Python names spelled as the C#'s).
    "scripts/perf/lab87.py": frozenset({"chave", "cliente_id", "conversa_id", "entrada", "ferramenta", "numero",
                                        "pedido_id", "prefixo", "resultado", "valor"}),
    "scripts/perf/race.py": frozenset({"conversa", "numero"}),  # perf2 branch owns; rename after merge
    "scripts/perf/scenarios.py": frozenset({"conversa", "consulta"}),  # perf2 branch owns; rename after merge
}


def _words(name: str) -> list[str]:
    for external in EXTERNAL_NAMES:
        name = re.sub(external, " ", name, flags=re.IGNORECASE)
    return [w.lower() for w in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", name)]


def portuguese(name: str) -> bool:
    return any(w in PORTUGUESE for w in _words(name))


def _target_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        return [target.attr]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in _target_names(elt)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return []


def _defined_names(node: ast.AST) -> list[str]:
    """The names this node defines (never the names it only uses)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.comprehension, ast.NamedExpr)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [n for t in targets for n in _target_names(t)]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [n for item in node.items if item.optional_vars for n in _target_names(item.optional_vars)]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    if isinstance(node, ast.alias) and node.asname:  # "import x as y" defines y (x is the other module's)
        return [node.asname]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
        return [str(kw.value.value) for kw in node.keywords if kw.arg == "dest" and isinstance(kw.value, ast.Constant)]
    return []


def findings(source: str) -> set[str]:
    return {name for node in ast.walk(ast.parse(source)) for name in _defined_names(node) if portuguese(name)}


def _checked_modules() -> list[Path]:
    return sorted(p for d in CHECKED_DIRS for p in (ROOT / d).rglob("*.py"))


def test_every_checked_module_exists():
    modules = {p.relative_to(ROOT).as_posix() for p in _checked_modules()}
    assert {"scripts/atendente.py", "scripts/harness/minimal.py", "orchestrator/human_reply.py",
            "functions/canal_whatsapp/ingress.py", "functions/canal_whatsapp/outbox.py", "orchestrator/loop.py",
            "functions/cadencia_shared/ledger/table.py", "infra/contract.py", "scripts/perf/lab87.py"} <= modules
    assert set(ALLOWED) <= modules, "an allow-listed module is gone or unchecked: drop it"


def test_python_identifiers_are_english():
    found = {p.relative_to(ROOT).as_posix(): findings(p.read_text(encoding="utf-8")) for p in _checked_modules()}
    unexpected = {m: sorted(names - ALLOWED.get(m, frozenset())) for m, names in found.items()}
    assert {m: n for m, n in unexpected.items() if n} == {}
    stale = {m: sorted(names - found[m]) for m, names in ALLOWED.items()}
    assert {m: n for m, n in stale.items() if n} == {}, "no longer used: remove from ALLOWED"


@pytest.mark.parametrize("source, expected", [
    ("def reply_id(conversa_id, text):\n    return conversa_id\n", {"conversa_id"}),
    ("class Summary:\n    arquitetura: str\n    def f(self):\n        self.modelo = 1\n",
     {"arquitetura", "modelo"}),
    ("for pedido, valorPedido in rows:\n    pass\n", {"pedido", "valorPedido"}),
    ("p.add_argument('--saida', dest='saida')\n", {"saida"}),
    ("with open(x) as arquivo:\n    pass\ntry:\n    pass\nexcept E as erro:\n    pass\n", {"arquivo", "erro"}),
    ("from ledger import Ledger as Registro\nimport json as dados\nfrom x import pedido\n", {"Registro", "dados"}),
    # used, not defined: the callee's names (wire fields, a model's attribute) are not this module's
    ("record(resultado=outcome, detalhe=detail)\nx = request.conversaId\nEMITIR_REEMBOLSO = 1\n", set()),
    # string contents are never identifiers
    ("answer = {'erro': {'codigo': 'x'}}\nkey = f'{order_id}#pedido'\n", set()),
])
def test_the_check_sees_definitions_only(source, expected):
    """The check can fail: each defined Portuguese name is reported, used names are not."""
    assert findings(source) == expected
