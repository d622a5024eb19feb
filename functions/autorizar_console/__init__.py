"""The operators' console's cookie authorizer: an API Gateway HTTP API ``REQUEST``
Lambda authorizer (payload 2.0, simple responses) that verifies the Cognito access
token in the ``cadencia_sessao`` cookie (docs/decisions/console-auth.md).

- ``verification``  the RS256 rules and the JWKS cache; the local stack's API adapter
                    runs the same module (one implementation, locally and on AWS)
- ``handler``       the Lambda's entry point
"""
