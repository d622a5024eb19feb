"""What a SEAL envelope costs in CPU (cadencia_shared.seal): sign and verify, in µs.

    .venv/bin/python -m scripts.perf.seal_cost [--repeat 2000]

Prints the median, over ``--repeat`` calls in this one run, of sealing a refund event
(canonical arguments' SHA-256, canonical message, Ed25519 signature) and of checking
one (the arguments' digest again, the signature against the session's public key).
The ledger's two round trips at the edge (GetItem on the session, PutItem on the jti)
are not in these numbers: they are DynamoDB latency, not CPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for entry in (str(ROOT / "functions"), str(ROOT)):  # runnable as the docstring says, from the checkout
    if entry not in sys.path:
        sys.path.insert(0, entry)

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat  # noqa: E402

from cadencia_shared.approval_arguments import canonical_arguments  # noqa: E402
from cadencia_shared.ledger.sessions import SessionLimits, SessionRecord, TurnSession  # noqa: E402
from cadencia_shared.seal import ENVELOPE_FIELD, call_arguments, seal, signed  # noqa: E402

EVENT = {"pedidoId": "4821", "valor": 120.0, "conversaId": "conv-bench", "clienteId": 1001}


def _median_us(run: object, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        run()  # type: ignore[operator]
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args(argv)
    key = Ed25519PrivateKey.generate()
    record = SessionRecord(session_id="bench", public_key=key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw),
                           conversation_id="conv-bench", customer_id=1001, tools=frozenset({"emitir_reembolso"}),
                           limits=SessionLimits(), expires_at_ms=2**62, state="aberta")
    session = TurnSession(record, key)
    event = seal(EVENT, tool="emitir_reembolso", session=session, now_ms=0)

    def verify() -> None:
        envelope = event[ENVELOPE_FIELD]
        assert canonical_arguments(call_arguments(event))[1] == envelope["argsSha256"]
        assert signed(record, envelope)

    sign_us = _median_us(lambda: seal(EVENT, tool="emitir_reembolso", session=session, now_ms=0), args.repeat)
    verify_us = _median_us(verify, args.repeat)
    print(f"seal/v1, mediana de {args.repeat} chamadas: assinar {sign_us:.1f} µs, verificar {verify_us:.1f} µs "
          "(sem as duas idas ao DynamoDB da borda)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
