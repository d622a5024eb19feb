"""What encoding the stored history costs a commit (orchestrator/history.py ``for_storage``).

    .venv/bin/python -m scripts.perf.history_encoding [--repeat 30]

For histories of a few sizes (customer texts, agent replies, tool calls with their results),
prints the median time of a commit's history work — bound it, then compress it
(``for_storage`` + ``compressed_json`` with its bytes) — beside the same work with the history
encoded twice, measured and then compressed (what a commit under the bound did before
``for_storage`` reused the bytes it measured), and how many values ``for_storage`` encodes:
under the bound the list, once; over it (the last rows) the list, then each message once and
one more per cut turn (the turn-cutting loop used to encode the whole list on every pass).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for entry in (str(ROOT / "functions"), str(ROOT)):  # runnable as the docstring says, from the checkout
    if entry not in sys.path:
        sys.path.insert(0, entry)

from cadencia_shared.ledger.table import compact_json, compressed_json  # noqa: E402
from orchestrator import history  # noqa: E402

REPLY = "Seu pedido 4821 foi entregue ontem às 14h. Posso ajudar em algo mais? " * 3
RESULT = '{"ok":true,"resultado":"consultado","dados":{"pedidoId":"4821","status":"entregue"}}'


def _conversation(turns: int) -> list[dict]:
    messages: list[dict] = []
    for n in range(turns):
        messages = history.append_user_text(messages, f"Oi, e o pedido {4000 + n}? Comprei há uma semana.")
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{n}", "name": "consultar_status_pedido",
             "input": {"pedidoId": str(4000 + n)}}]})
        messages.append({"role": "user", "content": [history.tool_result(f"toolu_{n}", RESULT, is_error=False)]})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": REPLY}]})
    return messages


def _median_ms(work: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def _commit_now(messages: list[dict], max_bytes: int) -> bytes:
    stored = history.for_storage(messages, max_bytes)
    return compressed_json(stored.messages, encoded=stored.encoded)


def _encoded_twice(messages: list[dict]) -> bytes:
    """Measured, then encoded again to compress (the earlier commit under the bound)."""
    assert len(compact_json(messages)) > 0
    return compressed_json(messages)


def _encodings(messages: list[dict], max_bytes: int) -> int:
    counted = 0
    real = history.compact_json

    def counting(value: object) -> bytes:
        nonlocal counted
        counted += 1
        return real(value)

    history.compact_json = counting  # type: ignore[assignment]  # a count, restored below
    try:
        history.for_storage(messages, max_bytes)
    finally:
        history.compact_json = real  # type: ignore[assignment]
    return counted


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=30)
    args = p.parse_args(argv)
    print("| turns | JSON bytes | bound | commit now, ms | encoded twice, ms | ratio | values encoded now |")
    print("|---|---|---|---|---|---|---|")
    rows = [(5, history.STORED_HISTORY_MAX_BYTES), (20, history.STORED_HISTORY_MAX_BYTES),
            (80, history.STORED_HISTORY_MAX_BYTES), (80, 40_000), (80, 10_000)]
    for turns, bound in rows:
        messages = _conversation(turns)
        # Each lambda is called (repeatedly) before the loop moves on: binding late is right here.
        now = _median_ms(lambda: _commit_now(messages, bound), args.repeat)  # noqa: B023
        twice = _median_ms(lambda: _encoded_twice(messages), args.repeat)  # noqa: B023
        print(f"| {turns} | {len(compact_json(messages))} | {bound} | {now:.3f} | {twice:.3f} | "
              f"{now / twice:.2f} | {_encodings(messages, bound)} ({len(messages)} messages) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
