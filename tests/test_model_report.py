"""The benchmark's model section renders what one run measured (scripts/perf/model_report.py)."""

from __future__ import annotations

from scripts.perf import model_cost, model_report, pricing


def test_the_section_prices_a_message_with_and_without_caching_from_one_run(mocked_aws, monkeypatch):
    monkeypatch.setattr(model_report, "conversations",
                        lambda: {"status10": [model_cost.status_conversation("rep-s10", 10)]})
    seen: list[str] = []
    rows = model_report.ratios(mocked_aws["ledger"], seen.append)
    assert [r["minimum"] for r in rows] == [1024, 2048, 4096] and len(seen) == 3
    ttl = [{"ttl": "5m / 5m", "billed": 123.0}]
    text = "\n".join(model_report.render(rows, ttl, aws_per_million=50.0, cpu_s=0.05))
    first = rows[0]
    assert f"**{first['ratio']:.3f}**" in text and "≤ 0.25 ✓" in text
    # One message priced by hand from the run's own figures: Sonnet, no caching.
    u = first["uncached"]
    by_hand = ((u.billed / u.messages) * 3.0 + (u.output_tokens / u.messages) * 15.0) / 1e6 \
        + (u.calls / u.messages * model_cost.MODEL_LATENCY_S + 0.05) * pricing.LAMBDA_GB_SECOND + 50.0 / 1e6
    assert f"| status10 | Claude Sonnet 4.5 | ${by_hand * 1e6:,.0f} |" in text
    assert "read 2026-12-05" in text and "| 5m / 5m | 123 |" in text
