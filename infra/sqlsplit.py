"""Split a PostgreSQL script into single statements.

The RDS Data API runs one statement per ``ExecuteStatement`` call, while the
files in ``sql/`` are psql scripts: several statements, comments, and
``DO $$ ... $$;`` blocks whose bodies contain semicolons. This splitter knows the
lexical forms in which a ``;`` does not end a statement: quoted strings
(``'...'`` with ``''``, ``E'...'`` with backslash escapes), quoted identifiers
(``"..."``), dollar-quoted bodies (``$tag$ ... $tag$``), ``--`` line comments and
nested ``/* */`` block comments. Comments outside quotes are dropped (they would
only travel to the database and back); everything else is kept byte for byte.
"""

from __future__ import annotations

import re

# A dollar-quote tag: $$ or $name$ where name is an identifier without '$'.
# "$1" (a positional parameter) is not a tag: tags cannot start with a digit.
_DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$")
_IDENT_CHAR = re.compile(r"[A-Za-z0-9_$\u0080-\uffff]")


class SqlSplitError(ValueError):
    """The script ends inside a quote or a comment."""


def split_statements(script: str) -> list[str]:
    """Return the statements of ``script`` without their terminating ``;``.

    Statements that are empty once comments are removed are skipped.
    """
    statements: list[str] = []
    current: list[str] = []
    i, n = 0, len(script)

    def flush() -> None:
        text = "".join(current).strip()
        if text:
            statements.append(text)
        current.clear()

    while i < n:
        if script[i] == ";":
            flush()
            i += 1
            continue
        end, kept = _token(script, i)
        current.append(kept)
        i = end
    flush()
    return statements


def _token(script: str, i: int) -> tuple[int, str]:
    """The lexical unit starting at ``i`` (a comment, a quoted string or identifier,
    a dollar-quoted body, or one character): where it ends, and the text it keeps."""
    ch, nxt = script[i], script[i + 1: i + 2]
    if ch == "-" and nxt == "-":
        return _end_of_line_comment(script, i), ""  # keep the newline as a separator
    if ch == "/" and nxt == "*":
        return _skip_block_comment(script, i), " "
    if ch == "'":
        escape = i > 0 and script[i - 1] in "eE" and not (i > 1 and _IDENT_CHAR.match(script[i - 2]))
        end = _end_of_string(script, i, backslash_escapes=escape)
        return end, script[i:end]
    if ch == '"':
        end = _end_of_quoted_identifier(script, i)
        return end, script[i:end]
    if ch == "$" and not (i > 0 and _IDENT_CHAR.match(script[i - 1])):
        quote_end = _end_of_dollar_quote(script, i)
        if quote_end is not None:
            return quote_end, script[i:quote_end]
    return i + 1, ch


def _end_of_line_comment(script: str, i: int) -> int:
    # PostgreSQL's lexer ends a line comment at LF or CR: ending it at LF only would
    # hide a statement after "-- ...<CR>" that the database runs.
    ends = [e for e in (script.find("\n", i), script.find("\r", i)) if e >= 0]
    return min(ends) if ends else len(script)


def _end_of_dollar_quote(script: str, i: int) -> int | None:
    """The end of a dollar-quoted body starting at ``i``, or None when ``$`` starts none."""
    match = _DOLLAR_TAG.match(script, i)
    if not match:
        return None
    tag = match.group(0)
    close = script.find(tag, match.end())
    if close < 0:
        raise SqlSplitError(f"unterminated dollar-quoted string {tag} at offset {i}")
    return close + len(tag)


def _skip_block_comment(script: str, start: int) -> int:
    # PostgreSQL block comments nest: /* a /* b */ c */ is one comment.
    depth, i, n = 0, start, len(script)
    while i < n:
        pair = script[i : i + 2]
        if pair == "/*":
            depth += 1
            i += 2
        elif pair == "*/":
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    raise SqlSplitError(f"unterminated block comment at offset {start}")


def _end_of_string(script: str, start: int, *, backslash_escapes: bool) -> int:
    i, n = start + 1, len(script)
    while i < n:
        ch = script[i]
        if backslash_escapes and ch == "\\":
            i += 2
            continue
        if ch == "'":
            if i + 1 < n and script[i + 1] == "'":  # '' is an escaped quote
                i += 2
                continue
            return i + 1
        i += 1
    raise SqlSplitError(f"unterminated string literal at offset {start}")


def _end_of_quoted_identifier(script: str, start: int) -> int:
    i, n = start + 1, len(script)
    while i < n:
        if script[i] == '"':
            if i + 1 < n and script[i + 1] == '"':
                i += 2
                continue
            return i + 1
        i += 1
    raise SqlSplitError(f"unterminated quoted identifier at offset {start}")
