"""Does the model's free text speak about money, the customer's record or an order's
status? Those sentences are the code's (``money_sentences``), so a free text that
makes one is refused and the model restates it as a typed statement.

Built for recall, not precision: a false refusal costs one more model round (or the
code-rendered fallback), a missed claim is a false sentence to a customer. It flags
- money words and their inflections, common typos (one edit; two for long words),
  abbreviations ("reemb.") and spaced-out spellings ("r e e m b o l s o"), English;
- any currency mark or amount, any number that is not a short span of time
  ("2 dias"), number words from ten up, letters mixed with digits (order ids);
- a "done" word (feito, pronto, caiu, saiu…) or a confirmation emoji anywhere:
  a claim split across sentences, or with no noun at all, is still a claim;
- the grammar of a finished action, whatever the verb: a participle after a copula
  ("tudo quitado"), a past tense after "já", a first-person past tense that is not
  looking or talking, a headline opening with a participle; diminutives too
  ("prontinho"). Word lists alone missed about 1 new claim in 10;
- record and status words beside a change or status verb.
Questions that offer or ask ("Quer que eu…?", "Qual é o novo endereço?", "Para eu
verificar, qual…?", "Se quiser, posso…") pass when they carry no number, currency,
done word or emoji.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

MONEY, PROFILE, STATUS = "dinheiro_no_texto", "cadastro_no_texto", "status_no_texto"

_MONEY_STEMS = (
    "reembols", "rembols", "reenbols", "reemb", "estorn", "estorm", "devolu", "devolv", "ressarc", "restitu",
    "refund", "reimburs", "credit", "debit", "dinheir", "grana", "pix", "cartao", "cartoes", "valor", "pagament",
    "pago", "paga", "pagou", "pagar", "pagamos", "paguei", "cobranc", "cobrad", "cobrar", "cobrou", "saldo",
    "fatura", "boleto", "transferenc", "transferi", "deposit", "reais", "centavo", "money", "cash", "payment",
    "paid", "charge", "bank", "banco", "extrato", "indeniz", "cupom", "desconto", "voucher", "juros", "parcela",
    "brl", "usd", "dolar", "dollar", "bucks", "contos", "pila", "caiu", "cair", "reembolso", "fund", "limite",
    "extorn", "cashback", "quitad", "quitac", "pingou", "pingando",
)
# Whole words only ("Caio" is a name, "caixa" a box): money that "fell" into an account.
_MONEY_WORDS = frozenset({"cai", "caira", "caindo", "caiam", "cairam", "pila", "real"})
# An account, not "me conta" (tell me): "na conta", "sua conta", "em conta"...
_ACCOUNT = re.compile(r"\b(?:na|nas|sua|tua|minha|em|pra|para a|da|de sua|bancaria) contas?\b"
                      r"|\bcontas? (?:bancaria|corrente)", re.ASCII)
_NOT_MONEY = ("acredit", "valoriz", "pagina", "bancad", "caix")  # "acredito", "página"
_FUZZY_LEMMAS = ("reembolso", "reembolsado", "estorno", "estornado", "devolucao", "devolvido", "ressarcimento",
                 "dinheiro", "credito", "creditado", "pagamento", "deposito", "depositado", "transferencia",
                 "refunded", "cartao")
_DONE = re.compile(
    r"\A(?:(?:realiz|process|emit|conclu|efetu|aprov|estorn|devolv|credit|deposit|envi|liber|confirm|pag|"
    r"execut|efetiv|finaliz|autoriz|resolv|solicit|registr|acion|encaminh|mand|cuid)(?:ad[oa]s?|id[oa]s?|ei|i|"
    r"amos|emos|imos|ou|eu|iu)|feit[oa]s?|fiz|fizemos|fez|pront[oa]s?|sucesso|caiu|saiu|"
    r"voltou|voltaram|volta|voltam|voltara|voltarao|retorn(?!os?\Z)\w*|aparec(?:eu|eram|ido|ida)|restabelec\w*|"
    r"recompos\w*|acert(?:ad[oa]s?|amos|ei|ou)|quit(?:amos|ei|ou)|compens(?:ou|ad[oa]s?)|zerad[oa]s?|"
    r"sorted|providenci\w*|resolvi|resolvemos|resolvido|garantid[oa]|done|processed|issued|completed|approved|sent|confirmed|returned|reversed|"
    r"succe\w*)\Z")
_EMOJI = set("✅✔☑✓✔💰💸💵💴💶💷💳🤑🏦🪙💲👍👌🎉🙌🆗🥳🤝")
_CURRENCY = re.compile(r"(?:r|us|u)?\$|€|£|¥|\b(?:brl|usd|eur)\b", re.ASCII)
_TIME_UNITS = frozenset({"dia", "dias", "hora", "horas", "h", "min", "minuto", "minutos", "semana", "semanas",
                         "mes", "meses", "uteis", "days", "hours", "weeks"})
_NUMBER_WORDS = re.compile(
    r"\A(?:dez|onze|doze|treze|quatorze|catorze|quinze|dezesseis|dezessete|dezoito|dezenove|vinte|trinta|"
    r"quarenta|cinquenta|cincoenta|sessenta|setenta|oitenta|noventa|cem|cento|duzent\w*|trezent\w*|"
    r"quatrocent\w*|quinhent\w*|seiscent\w*|setecent\w*|oitocent\w*|novecent\w*|mil|milh\w*|"
    r"ten|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand)\Z")
_PROFILE_NOUN = re.compile(r"\A(?:cadastr|endereco|enderco|endereç|telefone|telefne|celular|fone|e-?mail|email|"
                           r"cep|address|phone|rua|avenida|numero)")
_CHANGE = re.compile(r"\A(?:atualiz|alter|mud|troc|troq|modific|salv|corrig|registr|cadastr|substitu|edit|updat|"
                     r"chang|inclu|adicion|coloq|coloc|novo|nova)")
_STATUS = re.compile(r"\A(?:entreg|envi|despach|postad|postei|transit|rastrei|rastream|previs|cheg|camin|cancel|"
                     r"separa|fatur|expedi|transportad|deliver|shipp|tracking|arriv|saiu|sai|aguardando)")
_ORDER_NOUN = re.compile(r"\A(?:pedido|pedidos|compra|compras|encomenda|order|package|pacote)\Z")
_QUESTION_START = re.compile(r"\A(?:e |and )?(?:qual|quais|quer|queres|deseja|gostaria|pode|poderia|podes|posso|como|"
                             r"onde|quando|consegue|sabe|voce (?:quer|deseja|gostaria|consegue|pode|sabe)|"
                             r"me (?:passa|informa|diz|confirma|conta)|could|would|what|which|when|do you|can you)\b")
# A bare confirmation, with no noun ("Já foi!", "Tudo certo!", "Já está lá"): after a
# question about money it is a money claim, and the detector does not see the question.
_AFFIRM = re.compile(r"\A[^a-z0-9]*sim\b|\bfoi sim\b|\b(?:tudo (?:certo|ok|resolvido|pronto|certinho)"
                     r"|ja (?:esta|ta|foi|era|vai|vem)\b(?! (?:verificando|"
                     r"vendo|olhando|consultando|analisando))|esta la|ta la|disponivel"
                     r"|(?:esta|ta|fica) (?:no seu nome|com voce)|\bna (?:sua |tua )?mao|all set|it'?s done|"
                     r"went through|on (?:its|the) way|all good|good to go|taken care|"
                     r"(?:is|it'?s|are|they'?re|money'?s) back)\b", re.ASCII)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?\n]*")
_WORD = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*|[$€£¥]")


# Cyrillic and Greek letters that look Latin ("rеembolso" with a Cyrillic е).
_CONFUSABLES = str.maketrans("аеорсухіјѕԁԛԝАВЕКМНОРСТХІЈЅαβεικνορτυχΑΒΕΗΙΚΜΝΟΡΤΥΧ",
                             "aeopcyxijsdqwABEKMHOPCTXIJSabeiknoptuxABEHIKMNOPTYX")


def normalized(text: str, invisible: str = "") -> str:
    """Lowercase, no accents, look-alike letters folded, glued words split at a case
    change ("kTudo certo"); invisible characters (format, control) replaced by
    ``invisible``: removed, "reem\u200bbolso" is "reembolso"; a space, "x\x14Tudo" is two words."""
    text = _split_case(text.translate(_CONFUSABLES))
    decomposed = unicodedata.normalize("NFKD", text)
    kept = (ch if unicodedata.category(ch) not in ("Cf", "Cc") or ch == "\n" else invisible
            for ch in decomposed if unicodedata.category(ch) != "Mn")
    return re.sub(r"[ \t]+", " ", "".join(kept).lower())


def _split_case(text: str) -> str:
    out = []
    for i, ch in enumerate(text):
        prev, nxt = text[i - 1] if i else "", text[i + 1] if i + 1 < len(text) else ""
        if ch.isupper() and ((prev.islower()) or (prev.isupper() and nxt.islower())):
            out.append(" ")
        out.append(ch)
    return "".join(out)


def _edits(a: str, b: str, limit: int) -> int:
    """Optimal string alignment distance, stopped early above ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]


@lru_cache(maxsize=4096)  # the fuzzy match is the detector's cost; words repeat
def _is_money_word(word: str) -> bool:
    word = word.replace("-", "").replace("'", "")
    if word.startswith(_NOT_MONEY):
        return False
    if word in _MONEY_WORDS:
        return True
    if word.startswith(_MONEY_STEMS):
        return True
    if len(word) >= 4 and any(stem.startswith(word) for stem in ("reembolso", "estorno", "devoluc", "ressarc",
                                                                "refund", "dinheiro", "credito", "pagamento")):
        return True  # an abbreviation: "reemb", "estor", "dinh"
    if len(word) >= 5:  # a typo rarely changes both of the first two letters: the cheap filter first
        return any((word[0] == lemma[0] or word[1] == lemma[1] or word[:2] == lemma[1::-1])
                   and _edits(word, lemma, 2 if len(lemma) >= 8 else 1) <= (2 if len(lemma) >= 8 else 1)
                   for lemma in _FUZZY_LEMMAS)
    return False


_GOODS = frozenset({"produto", "produtos", "item", "itens", "mercadoria", "pacote", "encomenda", "product", "goods"})


def _money_words(words: list[str]) -> bool:
    """Any money word; "devolver o produto" (a return of goods) is not one."""
    for i, word in enumerate(words):
        if not _is_money_word(word):
            continue
        goods = word.startswith(("devolv", "devolu", "troca")) and _GOODS & set(words[i + 1:i + 5])
        if not goods:
            return True
    return False


def _spaced_out(text: str) -> list[str]:
    """"r e e m b o l s o", "r.e.e.m.b": runs of single letters, joined; a run that
    holds a money stem anywhere counts as that stem (a deliberate spelling)."""
    out = []
    for run in re.findall(r"(?:\b[a-z]\b[\s.\-_*]*){4,}", text):
        joined = "".join(run.split())
        out.append(joined)
        out += [word for stem, word in (("reembols", "reembolso"), ("estorn", "estorno"), ("devolv", "devolvido"),
                                        ("dinheir", "dinheiro"), ("credit", "credito"), ("feit", "feito"),
                                        ("pago", "pago")) if stem in joined]
    return out


def _numbers(words: list[str]) -> bool:
    for i, word in enumerate(words):
        if any(c.isdigit() for c in word):
            nxt = words[i + 1] if i + 1 < len(words) else ""
            if not (word.isdigit() and len(word) <= 2 and nxt in _TIME_UNITS):
                return True  # an amount, an order id, letters with digits
        elif _NUMBER_WORDS.match(word):
            nxt = words[i + 1] if i + 1 < len(words) else ""
            if nxt not in _TIME_UNITS:
                return True
    return False


def _near(words: list[str], first: re.Pattern[str], second: re.Pattern[str], window: int = 8) -> bool:
    a = [i for i, w in enumerate(words) if first.match(w)]
    b = [i for i, w in enumerate(words) if second.match(w)]
    return any(abs(i - j) <= window and i != j for i in a for j in b)


_DEGREE = re.compile(r"(?:inh|issim)([oa]s?)\Z|(ad|id)(?:ao|ona|oes|aco|aca)\Z")


def _done(word: str) -> bool:
    """A done word, also as a diminutive or augmentative ("prontinho", "feitinho",
    "finalizadíssimo", "liberadão"): slang grades the word, the claim stays."""
    if _DONE.match(word):
        return True
    base = _base(word)
    return base != word and _DONE.match(base) is not None


def _base(word: str) -> str:
    return _DEGREE.sub(lambda m: m.group(1) or m.group(2) + "o", word)


# What no word list covers: the grammar of a finished action. "Tudo quitado", "foi
# acertado", "já entrou", "já te devolvemos", "te extornei": a participle after a
# copula, a past tense after "já", a first-person past tense ("-ei") that is not
# looking, reading or talking ("verifiquei", "olhei", "falei" pass).
_FEELING = (r"(?:obrig|preocup|chate|frustr|ocup|cans|irrit|anim|duv|entr|sent|quer|cham|encant|combin|entend|pedid|"
            r"partid|comid|bebid|jornad|madrug|calc|vid|receb|ocorr|prez)")
_PARTICIPLE = re.compile(r"\b(?:ja|tudo|foi|foram|esta|estao|ta|tao|ficou|ficaram|sido)\s+(?:\w+\s+)?"
                         r"(?!" + _FEELING + r"\w*\b)(\w{3,}(?:ad|id)[oa]s?)\b", re.ASCII)
# A headline opening with a participle: "Operação revertida", "Valor estornado".
_BARE_PARTICIPLE = re.compile(r"\A(?!" + _FEELING + r")\w{3,}(?:ad|id)[oa]s?\Z", re.ASCII)
_PAST_WE = re.compile(r"\A(?!(?:vamos|estamos|podemos|temos|precisamos|somos|queremos|devemos|sabemos|aguard|"
                      r"agradec|sent|lament|entend|esper|gost|verific|olh|consult|analis|trabalh|atend|fic|fal|"
                      r"pedimos|conseguimos|acompanh|tent|segu|continu|prefer)\w*\Z)"
                      r"\w{3,}(?:amos|emos|imos)\Z", re.ASCII)
_PAST_AFTER_JA = re.compile(r"\bja\s+(?:\w+\s+)?(?!(?:estamos|vamos|podemos|temos|precisamos|somos|estou|vou|sou|"
                            r"dou)\b)\w{2,}(?:ou|eu|iu|ei|amos|emos|imos|aram|eram|iram)\b", re.ASCII)
_PAST_I = re.compile(r"\A\w{2,}ei\Z")
_LOOKING = re.compile(r"\A(?:verifiqu|olh|consult|chequ|analis|anot|fal|pergunt|procur|busqu|encontr|pens|gost|"
                      r"expliqu|avis|not|deix|cheg|esper|tent|ajud|escut|pass|lembr|entr|demor|achei|sei|fiqu|"
                      r"\w*(?:arei|irei)\Z|farei|direi|responderei)")


def _perfective(sentence: str, words: list[str]) -> bool:
    words = [_base(w) for w in words]  # "tá tudo ajeitadinho": graded, still done
    based = " ".join(words)
    return (_PARTICIPLE.search(based) is not None or _PAST_AFTER_JA.search(based) is not None
            or any(_PAST_I.match(w) and not _LOOKING.match(w) for w in words)
            or any(_PAST_WE.match(w) for w in words)
            or any(_BARE_PARTICIPLE.match(w) for w in words[:3]))


def _strong(sentence: str, words: list[str]) -> bool:
    """A currency mark, an amount or order id, or a done word: never the model's to say."""
    marks = (_CURRENCY, _ACCOUNT, _AFFIRM)
    return (any(m.search(sentence) is not None for m in marks) or _numbers(words)
            or any(_done(w) for w in words))


def _hard(sentence: str, words: list[str]) -> bool:
    """Never in the model's words, question or not: currency, amounts, order ids."""
    return _CURRENCY.search(sentence) is not None or _numbers(words)


# "Se quiser, posso pedir…": an offer, read as a question is.
_OFFER = re.compile(r"\A(?:se (?:voce )?(?:quiser|preferir|desejar)),? (?:eu )?(?:posso|consigo)\b", re.ASCII)
_CLAUSE = re.compile(r"[,:;] ")


def _question_after_clause(stripped: str) -> tuple[str, str] | None:
    """"Para eu verificar, qual é…?": the clause before the question is read as a
    statement ("Feito, posso ajudar em algo mais?" stays a claim), the rest as a question."""
    if stripped.endswith("?") and _QUESTION_START.match(stripped) is None:
        for cut in _CLAUSE.finditer(stripped):
            if _QUESTION_START.match(stripped[cut.end():]):
                return stripped[:cut.start()], stripped[cut.end():]
    return None


def _sentence_findings(sentence: str) -> set[str]:
    stripped = sentence.strip()
    split = _question_after_clause(stripped)
    if split is not None:
        return _sentence_findings(split[0]) | _sentence_findings(split[1])
    words = _WORD.findall(sentence) + _spaced_out(sentence)
    offer = _OFFER.match(stripped) is not None  # no "?": its done words still count
    question = offer or (stripped.endswith("?") and _QUESTION_START.match(stripped) is not None)
    money = _money_words(words)
    # In a question that offers or asks, a done word alone claims nothing ("quando fez a
    # compra?"); beside a money word it may ("posso confirmar que o reembolso foi feito?").
    checked = not question or money or offer
    strong = _strong(sentence, words) if checked else _hard(sentence, words)
    # A finished action with no noun of the record or an order is money's ("Tudo quitado").
    finished = checked and _perfective(sentence, words)
    return _kinds(words, question=question, money=money, strong=strong, finished=finished)


def _kinds(words: list[str], *, question: bool, money: bool, strong: bool, finished: bool) -> set[str]:
    found = set()
    if strong or (not question and money):
        found.add(MONEY)
    if question and not strong and not finished:
        return found
    found |= _record_and_status(words, strong or finished)
    return found | ({MONEY} if finished and not found else set())


def _record_and_status(words: list[str], strong: bool) -> set[str]:
    found = set()
    if _near(words, _PROFILE_NOUN, _CHANGE) or (strong and any(_PROFILE_NOUN.match(w) for w in words)):
        found.add(PROFILE)
    if any(_STATUS.match(w) for w in words) or (strong and any(_ORDER_NOUN.match(w) for w in words)):
        found.add(STATUS)
    return found


def findings(text: str) -> set[str]:
    """The kinds of statement the free text makes (empty: it may be delivered)."""
    # Per sentence, for the question exemption; a claim split across sentences is
    # still caught ("Seu reembolso. Saiu!": the done word alone is flagged). Read
    # twice: invisible characters removed, and read as spaces.
    found: set[str] = set()
    for flat in {normalized(text), normalized(text, " ")}:
        for sentence in _SENTENCE.findall(flat) or [flat]:
            found |= _sentence_findings(sentence)
    if any(ch in _EMOJI for ch in text):  # a confirmation emoji, anywhere
        found.add(MONEY)
    return found
