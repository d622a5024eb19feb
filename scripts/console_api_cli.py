"""The operators' command line over the HTTP API, with the person's own token.

    scripts/console entrar --usuario ana          (local issuer: asks the password)
    scripts/console listar
    scripts/console mostrar <aprovacaoId>
    scripts/console aprovar <aprovacaoId> --motivo "conferido" [--valor 150.00]
    scripts/console negar   <aprovacaoId> --motivo "fora da política"
    scripts/console responder <conversaId> --texto "Oi! Sou a Carla."
    scripts/console listar interruptores          (supervisores)
    scripts/console interruptor <ferramenta> desligar|ligar --motivo "gateway em manutenção"

One target: ``--api`` (default ``CADENCIA_API``, else the running local stack's API).
The token is the person's (``entrar`` stores it with mode 0600 in ``~/.cadencia/token``;
on AWS put a Cognito access token there, or in ``CADENCIA_TOKEN``). The API decides who is
acting from the token alone; this tool sends no name. Standard library only.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

TOKEN_FILE = Path(os.environ.get("CADENCIA_TOKEN_FILE", Path.home() / ".cadencia" / "token"))
LOCAL_CLIENT_ID = "cadencia-console-local"
WIDTH = 80


def _local_api() -> dict[str, str]:
    directory = Path(os.environ.get("CADENCIA_LOCAL_STACK_DIR", Path(__file__).resolve().parents[1] / ".local-stack"))
    ready = directory / "api.json"
    return json.loads(ready.read_text()) if ready.exists() else {}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="scripts/console", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--api", default=os.environ.get("CADENCIA_API"), help="endereço da API dos operadores")
    sub = p.add_subparsers(dest="command", required=True)
    login = sub.add_parser("entrar", help="obtém um token no emissor OpenID local")
    login.add_argument("--usuario", required=True)
    login.add_argument("--emissor", default=None)
    listing = sub.add_parser("listar", help="pedidos de aprovação pendentes (ou: listar interruptores)")
    listing.add_argument("what", metavar="o_que", nargs="?", choices=("aprovacoes", "interruptores"),
                         default="aprovacoes")
    switch = sub.add_parser("interruptor", help="desliga ou liga uma ferramenta para toda a frota (supervisores)")
    switch.add_argument("tool", metavar="ferramenta")
    switch.add_argument("action", metavar="acao", choices=("desligar", "ligar"))
    switch.add_argument("--motivo", dest="reason", required=True)
    show = sub.add_parser("mostrar")
    show.add_argument("approval_id", metavar="aprovacaoId")
    for name in ("aprovar", "negar"):
        cmd = sub.add_parser(name)
        cmd.add_argument("approval_id", metavar="aprovacaoId")
        cmd.add_argument("--motivo", dest="reason", required=True)
        if name == "aprovar":
            cmd.add_argument("--valor", dest="amount", default=None, help="um valor MENOR que o pedido (ex.: 150.00)")
    reply = sub.add_parser("responder")
    reply.add_argument("conversation_id", metavar="conversaId")
    reply.add_argument("--texto", dest="text", required=True)
    return p.parse_args(argv)


def _request(url: str, *, token: str | None, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    req = urllib.request.Request(url, data=data, headers=headers, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as err:
        try:
            return err.code, json.load(err)
        except ValueError:
            return err.code, {}


def _token() -> str:
    token = os.environ.get("CADENCIA_TOKEN") or (TOKEN_FILE.read_text().strip() if TOKEN_FILE.exists() else "")
    if not token:
        raise SystemExit("sem token: rode 'scripts/console entrar --usuario NOME' (ou defina CADENCIA_TOKEN)")
    return token


def login(args: argparse.Namespace, password: str | None = None) -> int:
    issuer = args.emissor or _local_api().get("emissor")
    if not issuer:
        raise SystemExit("emissor desconhecido: passe --emissor (a pilha local imprime o endereço no 'up')")
    form = urllib.parse.urlencode({"grant_type": "password", "username": args.usuario,
                                   "password": password if password is not None else getpass.getpass("senha: "),
                                   "client_id": LOCAL_CLIENT_ID}).encode()
    try:
        with urllib.request.urlopen(f"{issuer}/token", data=form, timeout=30) as resp:
            token = json.load(resp)["access_token"]
    except urllib.error.HTTPError:
        print("recusado: usuário ou senha incorretos", file=sys.stderr)
        return 1
    TOKEN_FILE.parent.mkdir(parents=True, exist_ok=True)
    TOKEN_FILE.touch(mode=0o600)
    TOKEN_FILE.write_text(token)
    print(f"token de {args.usuario} guardado em {TOKEN_FILE}")
    return 0


def _line(row: dict[str, Any]) -> str:
    text = (f"{row['aprovacaoId']}  R$ {row.get('valor') or '?':>9}  {row['status']:<9} "
            f"{row['ferramenta']} {row['argumentos'].get('pedidoId', '')}")
    return text[:WIDTH]


def _switch_lines(row: dict[str, Any]) -> list[str]:
    """The tool and its state; when a person set it, who, when and why on a second line."""
    lines = [f"{row['ferramenta']:<30} {row['estado']}"]
    if row.get("pessoaNome"):
        lines.append(f"  {row['pessoaNome']}, {row['alteradoEm']}: {row['motivo']}"[:WIDTH])
    return lines


def _show(status: int, body: dict[str, Any]) -> int:
    if status == 401:
        print("recusado: token ausente, expirado ou inválido (rode 'entrar' de novo)", file=sys.stderr)
        return 1
    if not body.get("ok"):
        error = body.get("erro") or {}
        line = f"recusado ({status}): {error.get('codigo', 'erro')} {error.get('mensagem', '')}"
        print(line.rstrip(), file=sys.stderr)
        return 1
    if "interruptores" in body:
        for row in body["interruptores"]:
            print("\n".join(_switch_lines(row)))
    elif "interruptor" in body:
        print(f"antes: {body.get('estadoAnterior')}; agora:")
        print("\n".join(_switch_lines(body["interruptor"])))
    elif "pendentes" in body:
        print(f"{len(body['pendentes'])} pedido(s) pendente(s)")
        for row in body["pendentes"]:
            print(_line(row))
    elif "aprovacao" in body:
        print(f"{body.get('resultado', 'pedido')}: {_line(body['aprovacao'])}")
        if body.get("substituiu"):
            print(f"substituiu o pedido {body['substituiu']} (valor menor)")
    else:
        print(f"resposta {body.get('respostaId')}: envio {body.get('envio')}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "entrar":
        return login(args)
    api = (args.api or _local_api().get("api") or "").rstrip("/")
    if not api:
        raise SystemExit("API desconhecida: passe --api ou defina CADENCIA_API (ou suba a pilha local)")
    quoted = urllib.parse.quote
    if args.command == "listar":
        return _show(*_request(f"{api}/{args.what}", token=_token()))
    if args.command == "interruptor":
        state = "desligada" if args.action == "desligar" else "ligada"
        return _show(*_request(f"{api}/interruptores/{quoted(args.tool, safe='')}", token=_token(),
                               body={"estado": state, "motivo": args.reason}))
    if args.command == "mostrar":
        return _show(*_request(f"{api}/aprovacoes/{quoted(args.approval_id, safe='')}", token=_token()))
    if args.command == "responder":
        return _show(*_request(f"{api}/conversas/{quoted(args.conversation_id, safe='')}/respostas", token=_token(),
                               body={"texto": args.text}))
    body = {"decisao": args.command, "justificativa": args.reason,
            **({"valorAprovado": args.amount} if getattr(args, "amount", None) else {})}
    return _show(*_request(f"{api}/aprovacoes/{quoted(args.approval_id, safe='')}/decisao", token=_token(),
                           body=body))


if __name__ == "__main__":
    sys.exit(main())
