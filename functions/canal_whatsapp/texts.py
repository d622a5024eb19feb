"""Fixed texts the channel sends without consulting the model (pt-BR)."""

from __future__ import annotations

from .models import FixedReason

UNKNOWN_NUMBER = (
    "Olá! Não encontramos um cadastro da Cadência ligado a este número de WhatsApp. "
    "Por segurança, só atendemos por aqui números cadastrados. Você pode vincular seu número "
    "no app ou no site da Cadência, em Minha conta > Atendimento."
)
UNSUPPORTED_TYPE = (
    "Por enquanto eu só consigo ler mensagens de texto. Pode escrever sua dúvida em uma mensagem?"
)
TOO_LONG = "Sua mensagem ficou longa demais para mim. Pode resumir em uma mensagem mais curta?"
INVALID_TEXT = (
    "Não consegui ler sua mensagem: ela tem caracteres invisíveis ou de controle. "
    "Pode escrevê-la de novo, só com texto?"
)

MALFORMED = "Não consegui ler sua mensagem. Pode enviá-la de novo, em texto?"

FIXED_REPLIES: dict[FixedReason, str] = {
    FixedReason.UNKNOWN_NUMBER: UNKNOWN_NUMBER,
    FixedReason.UNSUPPORTED_TYPE: UNSUPPORTED_TYPE,
    FixedReason.TOO_LONG: TOO_LONG,
    FixedReason.INVALID_TEXT: INVALID_TEXT,
    FixedReason.MALFORMED: MALFORMED,
}
