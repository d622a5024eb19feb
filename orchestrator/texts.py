"""Everything the customer reads that the code (not the model) writes.
Brazilian Portuguese; Lab 87's handoff sentence kept word for word. The ``{order_id}`` and
``{amount}`` placeholders are Python's (``str.format`` keywords), never seen by the customer."""

HANDOFF_CEILING_ORDER = (
    "Não consigo confirmar isso automaticamente depois de várias tentativas — "
    "vou encaminhar para um atendente humano revisar o pedido {order_id}."
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
# An approved call whose tool an operator stopped before it ran (orchestrator/resume.py).
APPROVED_TOOL_STOPPED_HANDED_OFF = (
    "A operação do seu pedido está temporariamente suspensa pela nossa equipe; um atendente vai acompanhar e "
    "falar com você por aqui."
)
APPROVED_TOOL_STOPPED = (
    "Sua solicitação para o pedido {order_id} foi aprovada, mas a operação está temporariamente suspensa "
    "pela nossa equipe e nada foi feito. Um atendente vai acompanhar e falar com você por aqui."
)
# The output contract's fallback is rendered from the ledger (money_sentences.fallback).
IN_PROGRESS = "Recebi sua mensagem e já estou cuidando dela."

# Approvals: each sentence true when said — nothing has moved yet.
# Of the request that waits only: other calls of the same response may have moved money.
AWAITING_APPROVAL = (
    "O reembolso do pedido {order_id} precisa da aprovação de uma pessoa da nossa equipe. Já enviei o pedido "
    "para análise e te aviso por aqui assim que houver uma decisão. Esse reembolso ainda não movimentou nenhum valor."
)
STILL_AWAITING_APPROVAL = (
    "Seu pedido de reembolso ainda está em análise por uma pessoa da nossa equipe. "
    "Te aviso por aqui assim que houver uma decisão."
)
NO_APPROVER = (
    "Esse reembolso precisa da aprovação de uma pessoa, e não consigo concluí-lo automaticamente — "
    "vou encaminhar para um atendente humano. Nenhum valor foi movimentado."
)
APPROVAL_DENIED = ("Seu pedido de reembolso do pedido {order_id} foi analisado e não foi aprovado. "
                   "Nenhum valor foi movimentado.")
APPROVAL_UNUSABLE_HANDED_OFF = (
    "A aprovação do seu pedido de reembolso não pôde ser usada (expirou ou não confere com o pedido) — "
    "vou encaminhar para um atendente humano."
)
# Said only when the call's claim proves nothing moved (handoff_texts.approval_unusable).
APPROVAL_UNUSABLE = f"{APPROVAL_UNUSABLE_HANDED_OFF} Nenhum valor foi movimentado."
# A request that expired undecided: closed, nothing moved, the agent answers again.
APPROVAL_EXPIRED = (
    "O pedido de aprovação do reembolso do pedido {order_id} expirou sem uma decisão da nossa equipe. "
    "Nenhum valor foi movimentado. Se ainda quiser o reembolso, é só me pedir de novo."
)
# Approved by a person, but not run before the approval's expiry (its resume was lost or late).
APPROVED_EXPIRED = (
    "O reembolso do pedido {order_id} foi aprovado pela nossa equipe, mas não foi executado dentro do prazo "
    "da aprovação, que expirou. Nenhum valor foi movimentado. Se ainda quiser o reembolso, é só me pedir de novo."
)
# After an approved call ran: by what the tool answered (its outcome), never more.
APPROVED_EXECUTED = "Seu reembolso de R$ {amount} do pedido {order_id} foi aprovado e emitido."
APPROVED_ALREADY = "O reembolso do pedido {order_id} já tinha sido processado; nenhum valor novo foi movimentado."
# The same key already held a declined refund: the tool answers it, nothing is sent.
APPROVED_ALREADY_DECLINED = (
    "O reembolso do pedido {order_id} já tinha sido recusado pelo meio de pagamento nesta conversa. "
    "Nenhum valor foi movimentado."
)
APPROVED_UNCONFIRMED = (
    "Seu reembolso do pedido {order_id} foi aprovado. Ainda estou aguardando a confirmação do meio de pagamento "
    "e te aviso assim que ela chegar."
)
# Not "nothing moved": a tool that timed out may have reached the gateway.
APPROVED_NOT_DONE = (
    "Seu reembolso do pedido {order_id} foi aprovado, mas não consegui confirmar a emissão agora — "
    "vou encaminhar para um atendente humano conferir."
)

SYSTEM_PROMPT = """Você é o assistente de atendimento da Cadência no WhatsApp. Responda sempre em \
português do Brasil, com frases curtas e cordiais.

Você pode consultar o status de um pedido do cliente, emitir um reembolso de um pedido do cliente e \
atualizar endereço, telefone ou e-mail do cadastro do cliente, usando as ferramentas disponíveis. \
O cliente já está identificado pela conversa: nunca peça nem use o identificador de outro cliente.

Use o resultado das ferramentas para responder. Se uma ferramenta disser que uma ação já foi \
processada, informe isso ao cliente em vez de tentar de novo. Não prometa o que uma ferramenta não confirmou.

Termine sempre chamando a ferramenta responder_cliente: 'texto' é a mensagem ao cliente, 'precisaDePessoa' \
indica se um atendente humano precisa agir e 'declaracoes' traz uma declaração tipada para cada fato sobre \
reembolso (executado, aguardando aprovação, recusado pelo meio de pagamento, sem confirmação, não feito), \
cadastro atualizado ou status de pedido. O 'texto' NÃO fala de dinheiro, valores, números de pedido, cadastro nem \
status: o código confere cada declaração no registro e escreve ele mesmo essas frases para o cliente. Uma \
resposta recusada volta com o motivo."""
