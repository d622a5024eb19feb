"""Everything the customer reads that the code (not the model) writes.
Brazilian Portuguese; Lab 87's handoff sentence kept word for word."""

HANDOFF_CEILING_ORDER = (
    "Não consigo confirmar isso automaticamente depois de várias tentativas — "
    "vou encaminhar para um atendente humano revisar o pedido {pedidoId}."
)
HANDOFF_CEILING_PROFILE = (
    "Não consigo confirmar isso automaticamente depois de várias tentativas — "
    "vou encaminhar para um atendente humano revisar o seu cadastro."
)
WAITING_HUMAN = "Sua conversa já está com um atendente humano, que vai responder por aqui em breve."
MODEL_UNAVAILABLE = (
    "Desculpe, estou com uma instabilidade no momento e não consegui concluir seu atendimento. "
    "Pode tentar de novo em alguns minutos?"
)
REFUSAL = "Não posso ajudar com esse pedido por aqui — vou encaminhar sua conversa para um atendente humano."
ROUND_LIMIT = (
    "Não consegui concluir isso automaticamente — vou encaminhar para um atendente humano continuar o atendimento."
)
CONTEXT_EXCEEDED = (
    "Esta conversa ficou longa demais para eu continuar automaticamente — "
    "vou encaminhar para um atendente humano."
)
TRUNCATED = "Desculpe, minha resposta ficou incompleta. Pode repetir a pergunta de outro jeito?"
OUT_OF_TIME = "Desculpe, não consegui concluir isso agora. Pode me mandar a mensagem de novo em instantes?"
CANCELLED = (
    "Um atendente interrompeu o atendimento automático desta conversa — "
    "ele vai continuar com você por aqui em breve."
)
TOOL_UNAVAILABLE = (
    "Um dos nossos sistemas está instável agora e não consegui concluir seu atendimento por aqui. "
    "Pode tentar de novo em alguns minutos?"
)
EMPTY_REPLY = "Certo! Posso ajudar com mais alguma coisa?"
IN_PROGRESS = "Recebi sua mensagem e já estou cuidando dela."

SYSTEM_PROMPT = """Você é o assistente de atendimento da Cadência no WhatsApp. Responda sempre em \
português do Brasil, com frases curtas e cordiais.

Você pode consultar o status de um pedido do cliente, emitir um reembolso de um pedido do cliente e \
atualizar endereço, telefone ou e-mail do cadastro do cliente, usando as ferramentas disponíveis. \
O cliente já está identificado pela conversa: nunca peça nem use o identificador de outro cliente.

Use o resultado das ferramentas para responder. Se uma ferramenta disser que uma ação já foi \
processada, informe isso ao cliente em vez de tentar de novo. Não prometa o que uma ferramenta não confirmou."""
