"""The operators' console in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``, scripts/setup.sh installs them) driven by Selenium against the local
stack's operators' API (the OpenID issuer, the adapter's cookie authorizer, the decision
function's pages). Every refused case: the request still pending and 0 debits."""

from __future__ import annotations

import json
import os
import shutil
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator

import pytest

from cadencia_shared.approvals import ApprovalStatus
from cadencia_shared.ledger import SwitchState
from orchestrator.events import TurnRequest
from orchestrator.invokers.local import InProcessInvoker
from orchestrator.model import Deadline

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import CountingInvoker, build
from .test_operator_api import POLICY, USERS, _chain, _ledger, _status, _waiting, api, token  # noqa: F401 - fixture reused

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
if not (CHROMIUM and DRIVER):
    if os.environ.get("CI") == "true":  # CI installs them (scripts/setup.sh): missing there is a failure
        raise RuntimeError("chromium and chromedriver are required in CI (scripts/setup.sh installs them)")
    pytest.skip("chromium/chromedriver not installed (scripts/setup.sh installs them)", allow_module_level=True)

from selenium import webdriver  # noqa: E402 - only once the browser is known to be there
from selenium.common.exceptions import WebDriverException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

HOSTILE = '<script>document.title="pwned"</script><img src=x onerror="document.title=\'pwned\'">'


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM or ""
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER or ""), options=options)
    driver.set_page_load_timeout(120)
    driver.implicitly_wait(5)
    try:
        yield driver
    finally:
        driver.quit()


def sign_in(driver: webdriver.Chrome, api, login: str) -> None:
    driver.delete_all_cookies()
    driver.get(f"{api.url}/console/entrar")
    driver.find_element(By.ID, "login").send_keys(login)
    driver.find_element(By.ID, "senha").send_keys(USERS[login].password)
    submit(driver, "entrar")
    assert driver.find_element(By.ID, "pessoa").text.startswith(login)


def submit(driver: webdriver.Chrome, form_id: str, **fields: str) -> None:
    form = driver.find_element(By.ID, form_id)
    for name, value in fields.items():
        form.find_element(By.NAME, name).send_keys(value)
    # The old document is marked; the next page is loaded once a complete document lacks the mark.
    # (Selenium's staleness_of asks the old node, which chromedriver may answer with a plain
    # WebDriverException "Node with given id does not belong to the document" mid-navigation.)
    driver.execute_script("document.documentElement.dataset.enviado = 'sim'")
    form.find_element(By.TAG_NAME, "button").click()
    WebDriverWait(driver, 120, ignored_exceptions=(WebDriverException,)).until(_next_page_loaded)


def _next_page_loaded(driver: webdriver.Chrome) -> bool:
    return bool(driver.execute_script(
        "return document.readyState === 'complete' && document.documentElement.dataset.enviado === undefined"))


def test_an_approver_approves_from_the_page_and_the_refund_runs_once(local_stack, erp, gateway, api, browser):
    conv, approval = _waiting(local_stack, 120.0)
    sign_in(browser, api, "ana")
    row = browser.find_element(By.CSS_SELECTOR, f'tr[data-aprovacao="{approval}"]')
    assert "valor acima do limite automático" in row.text and "emitir_reembolso" in row.text
    row.find_element(By.TAG_NAME, "a").click()
    submit(browser, "aprovar", justificativa="conferido com o cliente")
    assert browser.find_element(By.ID, "situacao").text in ("aprovada", "consumida")
    assert USERS["ana"].sub in browser.find_element(By.ID, "decidido-por").text
    assert [d["valor"] for d in gateway.debits_for(conv)] == ["120.00"]
    decided = [r["detalhes"] for r in _chain(local_stack, conv) if r["evento"] == "APROVACAO_DECIDIDA"]
    assert [(d["pessoaSub"], d["pessoaNome"], d["via"]) for d in decided] == [(USERS["ana"].sub, "ana", "api")]


def test_above_the_two_person_amount_the_page_needs_a_second_approver(local_stack, erp, gateway, api, browser):
    conv, approval = _waiting(local_stack, 189.9)  # above POLICY's R$ 150 for two people
    for login in ("ana", "ana"):  # the same person twice changes nothing
        sign_in(browser, api, login)
        browser.get(f"{api.url}/console/aprovacoes/{approval}")
        submit(browser, "aprovar", justificativa="conferido com o cliente")
        assert "falta a de outra pessoa" in browser.find_element(By.ID, "aviso").text
        assert browser.find_element(By.ID, "situacao").text == "pendente"
        assert gateway.debits_for(conv) == []
    sign_in(browser, api, "bruno")
    browser.get(f"{api.url}/console/aprovacoes/{approval}")
    submit(browser, "aprovar", justificativa="segunda pessoa confere")
    assert browser.find_element(By.ID, "situacao").text in ("aprovada", "consumida")
    assert USERS["bruno"].sub in browser.find_element(By.ID, "decidido-por").text
    assert [d["valor"] for d in gateway.debits_for(conv)] == ["189.90"]


def test_an_approver_denies_with_a_hostile_reason_shown_as_text(local_stack, erp, gateway, api, browser):
    conv, approval = _waiting(local_stack, 120.0)
    sign_in(browser, api, "bruno")
    browser.get(f"{api.url}/console/aprovacoes/{approval}")
    submit(browser, "negar", justificativa=f"fora da política {HOSTILE}")
    assert browser.find_element(By.ID, "situacao").text == "negada"
    assert HOSTILE in browser.find_element(By.ID, "justificativa").text  # shown as text, not markup
    assert browser.title != "pwned" and browser.find_elements(By.CSS_SELECTOR, "#justificativa img") == []
    assert gateway.debits_for(conv) == []


def test_an_attendant_sees_no_approve_button_and_a_forged_post_is_403(local_stack, erp, gateway, api, browser):
    conv, approval = _waiting(local_stack, 120.0)
    sign_in(browser, api, "carla")
    browser.get(f"{api.url}/console/aprovacoes/{approval}")
    assert browser.find_elements(By.ID, "aprovar") == [] and browser.find_elements(By.ID, "negar") == []
    assert browser.find_element(By.ID, "somente-leitura")
    # The attendant's own session and CSRF token, a hand-made POST: the group decides.
    cookie = browser.get_cookie("cadencia_sessao")
    assert cookie and cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Strict"
    status = post(api, f"/console/aprovacoes/{approval}/decisao", cookie["value"],
                  {"decisao": "aprovar", "justificativa": "forjado"}, csrf=True)
    assert status == 403
    assert _status(local_stack, approval) is ApprovalStatus.PENDING
    assert gateway.debits_for(conv) == []


def test_a_supervisor_stops_a_tool_and_the_next_call_is_refused(local_stack, erp, gateway, api, browser):
    sign_in(browser, api, "davi")
    browser.get(f"{api.url}/console/interruptores")
    submit(browser, "interruptor-emitir_reembolso", motivo=f"gateway em manutenção {HOSTILE}")
    try:
        row = browser.find_element(By.ID, "interruptor-emitir_reembolso")
        assert row.find_element(By.CLASS_NAME, "estado").text == "desligada"
        assert HOSTILE in row.find_element(By.CLASS_NAME, "motivo").text and browser.title != "pwned"
        assert _ledger(local_stack).tool_switch("emitir_reembolso").state is SwitchState.STOPPED
        conv, invoker = _refund_attempt(local_stack)
        assert sum(invoker.calls.values()) == 0 and gateway.debits_for(conv) == []
    finally:
        browser.get(f"{api.url}/console/interruptores")
        submit(browser, "interruptor-emitir_reembolso", motivo="manutenção encerrada")
    assert _ledger(local_stack).tool_switch("emitir_reembolso").state is SwitchState.RUNNING
    sign_in(browser, api, "ana")  # not a supervisor: the page is refused
    browser.get(f"{api.url}/console/interruptores")
    assert "não está no grupo" in browser.find_element(By.ID, "mensagem").text


def test_a_missing_or_forged_csrf_token_or_cookie_is_refused_and_nothing_changes(local_stack, erp, gateway, api):
    conv, approval = _waiting(local_stack, 120.0)
    session = token(api, "ana")
    body = {"decisao": "aprovar", "justificativa": "conferido com o cliente"}
    assert post(api, f"/console/aprovacoes/{approval}/decisao", session, body) == 403  # no token
    assert post(api, f"/console/aprovacoes/{approval}/decisao", session, {**body, "csrf": "0" * 64}) == 403
    other = token(api, "bruno")  # another session's token
    assert post(api, f"/console/aprovacoes/{approval}/decisao", session, body, csrf_of=other) == 403
    assert post(api, f"/console/aprovacoes/{approval}/decisao", None, body, csrf_of=session) == 401  # no cookie
    assert post(api, f"/console/aprovacoes/{approval}/decisao", session + "x", body, csrf=True) == 401  # forged
    assert post(api, f"/console/aprovacoes/{approval}/decisao", session, {**body, "aprovador": "bruno"},
                csrf=True) == 400  # an actor in the form
    assert _status(local_stack, approval) is ApprovalStatus.PENDING
    assert gateway.debits_for(conv) == []


def post(api, path: str, session: str | None, fields: dict[str, str], *, csrf: bool = False,
         csrf_of: str | None = None) -> int:
    from decidir_aprovacao.console_session import csrf_token

    if csrf or csrf_of:
        fields = {**fields, "csrf": csrf_token(csrf_of or session or "")}
    req = urllib.request.Request(f"{api.url}{path}", data=urllib.parse.urlencode(fields).encode(), method="POST",
                                 headers={"Content-Type": "application/x-www-form-urlencoded",
                                          **({"Cookie": f"cadencia_sessao={session}"} if session else {})})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return err.code


def _refund_attempt(local_stack) -> tuple[str, CountingInvoker]:
    """A refund below the approval threshold, while the tool is stopped: the control
    refuses it before any invocation and the model reads ``ferramenta_desligada``."""
    conv = f"console-{uuid.uuid4().hex[:10]}"
    model = ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 50.0}), text_reply("ok"))
    invoker = CountingInvoker(InProcessInvoker(local_stack.function_environments()))
    orch, _ = build(model, _ledger(local_stack), invoker, **POLICY)
    orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}",
                            mensagem="reembolso"), Deadline.after(60))
    refusals = [b for r in model.requests for m in r["messages"] if m["role"] == "user"
                and isinstance(m["content"], list) for b in m["content"]
                if b.get("type") == "tool_result" and b.get("is_error")]
    assert refusals and "ferramenta_desligada" in json.dumps(refusals[-1]["content"])
    return conv, invoker
