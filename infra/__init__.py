"""The CDK app of the Cadência agent (Lab 87 in Python).

- ``app``        CDK entry point (``cdk.json``)
- ``stack``      the stack: ledger, secrets, tool Lambdas, orchestrator, database, network, alarms
- ``config``     deployment options from CDK context
- ``contract``   the least-privilege contract, rendered as the README's access matrix
- ``policy_check`` compares a synthesized template's roles with the contract
- ``packaging``  Docker-free, cached, reproducible Lambda assets
- ``sqlsplit``   splits sql/*.sql into single statements for the RDS Data API
- ``teardown``   scripts/limpeza.sh: ordered teardown (AWS or the local stack)
"""

import sys as _sys
from pathlib import Path as _Path

# The catalog, the ledger's key schema and the metric names live in the shared
# package under functions/ (the single source of truth the Lambdas import too);
# pytest puts functions/ on the path, `python -m infra.app` needs it here.
_FUNCTIONS = str(_Path(__file__).resolve().parents[1] / "functions")
if _FUNCTIONS not in _sys.path:
    _sys.path.insert(0, _FUNCTIONS)
