"""The refund against gateway answers a real gateway may give but the local model
never does: a 4xx with a huge ``erro`` field, and bodies whose status contradicts
the HTTP status (a 402 saying ``aprovado``, a 201 saying ``recusado``).

A real loopback HTTP server plays the gateway; the refund runs through its real
handler, the real PostgreSQL ERP and the ledger on the moto server."""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cadencia_shared.catalog import EMITIR_REEMBOLSO
from cadencia_shared.ledger import ClaimStatus, refund_idempotency_key
from emitir_reembolso import handler as refund_handler
from emitir_reembolso.settings import RefundSettings
from orchestrator.invokers.local import function_environment

ORDER = "4821"
HUGE = 1_000_000


class _ScriptedGateway(BaseHTTPRequestHandler):
    """Answers every POST with ``code`` and a body carrying ``status_text`` (a
    refund record) or ``erro`` (an error body)."""

    code = 201
    status_text: str | None = "aprovado"
    erro: str | None = None

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.erro is not None:
            data = {"erro": self.erro}
        else:
            data = {"id": "re_scripted_1", "status": self.status_text, "valor": body["valor"],
                    "pedidoId": body["pedidoId"], "criadoEm": "2026-12-01T00:00:00Z"}
        payload = json.dumps(data).encode()
        self.send_response(self.code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *_):
        pass


@pytest.fixture
def scripted_gateway(tools):
    servers = []

    def start(**answer) -> None:
        server = ThreadingHTTPServer(("127.0.0.1", 0), type("Gw", (_ScriptedGateway,), answer))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        tools.overrides[EMITIR_REEMBOLSO.name] = {"GATEWAY_URL": f"http://127.0.0.1:{server.server_address[1]}"}

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _refund(tools, erp):
    conv = f"conv-{uuid.uuid4().hex[:8]}"
    before = erp.execute("SELECT valor_reembolsado FROM pedidos WHERE id = %s", (ORDER,)).fetchone()[0]
    out = tools(EMITIR_REEMBOLSO, {"conversaId": conv, "clienteId": 1001, "pedidoId": ORDER, "valor": 10.0})
    key = refund_idempotency_key(conv, ORDER)
    with function_environment(tools.environment(EMITIR_REEMBOLSO)):
        claim = refund_handler.adapters(RefundSettings.from_env()).ledger.get_claim(key)
    reservation = erp.execute("SELECT status FROM reembolsos WHERE chave_idempotencia = %s", (key,)).fetchone()
    after = erp.execute("SELECT valor_reembolsado FROM pedidos WHERE id = %s", (ORDER,)).fetchone()[0]
    return out, claim, reservation, after - before


@pytest.mark.parametrize(("code", "status_text"), [(402, "aprovado"), (201, "recusado"), (200, "recusado"),
                                                   (402, "pendente")])
def test_an_answer_that_contradicts_its_http_status_holds_the_amount(tools, erp, scripted_gateway,
                                                                     code, status_text):
    """A 402 whose body says ``aprovado`` may have debited; a 2xx whose body says
    ``recusado`` may not have. Neither is definitive: never release, never apply."""
    scripted_gateway(code=code, status_text=status_text)
    out, claim, reservation, applied = _refund(tools, erp)
    text = json.dumps(out, ensure_ascii=False)
    assert claim.status is ClaimStatus.UNKNOWN, claim.status
    assert reservation == ("reservado",), "held: neither released nor applied"
    assert applied == 0
    assert "nada foi debitado" not in text and "reembolso de R$" not in text.lower(), out


def test_a_huge_error_field_is_stored_capped(tools, erp, scripted_gateway, capsys):
    """A 400 carrying a 1 MB ``erro``: a definitive rejection (released), but what
    the ledger keeps of it, and what any log line says, stays small."""
    scripted_gateway(code=400, erro="x" * HUGE)
    out, claim, reservation, applied = _refund(tools, erp)
    assert claim.status is ClaimStatus.FAILED_BEFORE_GATEWAY
    assert reservation == ("liberado",) and applied == 0
    assert claim.detail is not None and "HTTP 400" in claim.detail
    assert len(claim.detail) <= 256, len(claim.detail)
    logged = capsys.readouterr()
    assert "x" * 1000 not in logged.out + logged.err
    assert "x" * 1000 not in json.dumps(out)


@given(st.one_of(st.text(max_size=2000), st.integers(), st.lists(st.text(max_size=300), max_size=20),
                 st.dictionaries(st.text(max_size=50), st.text(max_size=300), max_size=10)))
def test_the_kept_error_code_is_short_and_printable_whatever_the_gateway_sends(erro):
    from emitir_reembolso.gateway import ERROR_CODE_MAX, _clip

    kept = _clip(erro)
    assert isinstance(kept, str) and len(kept) <= ERROR_CODE_MAX + 3
    assert "\n" not in kept and "\r" not in kept
    if isinstance(erro, str) and len(erro) <= ERROR_CODE_MAX and erro.isprintable():
        assert kept == erro  # ordinary codes ("idempotency_key_reutilizada") stay as they are
