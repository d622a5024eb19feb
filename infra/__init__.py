"""The CDK app of the Cadência agent (Lab 87 in Python).

- ``app``        CDK entry point (``cdk.json``)
- ``stack``      a short stack composing the constructs: ``ledger``, ``network``, ``database``,
                 ``tool_function`` (one per registry row), ``orchestrator_function``, ``monitoring``,
                 and ``handoffs``, ``reconciler``, ``channel``, ``approvals``, ``controls``
- ``base``       what they build with (``LambdaFunction``, ``Flat``: logical ids kept)
- ``config``     deployment options from CDK context
- ``contract``   the least-privilege contract (hand-written), ``access_matrix`` renders it for docs/access-matrix.md
- ``policy_check`` compares a synthesized template's roles with the contract
- ``packaging``  Docker-free, cached, reproducible Lambda assets
- ``sqlsplit``   splits sql/*.sql into single statements for the RDS Data API
- ``teardown``   scripts/limpeza.sh: ordered teardown in AWS (the local stack's: scripts/local_teardown.py)
"""

import sys as _sys
from pathlib import Path as _Path

# The catalog, the ledger's key schema and the metric names live in the shared
# package under functions/ (the single source of truth the Lambdas import too);
# pytest puts functions/ on the path, `python -m infra.app` needs it here.
_FUNCTIONS = str(_Path(__file__).resolve().parents[1] / "functions")
if _FUNCTIONS not in _sys.path:
    _sys.path.insert(0, _FUNCTIONS)
