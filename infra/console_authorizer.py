"""The console's cookie authorizer (functions/autorizar_console): its role, log group
and function, and the HTTP API authorizer that runs it.

The console's pages are navigations and form posts: the browser sends the person's
access token in the ``cadencia_sessao`` cookie, never in an ``Authorization`` header,
so the API's JWT authorizer cannot see it (docs/decisions/console-auth.md). This
``REQUEST`` Lambda authorizer (payload 2.0, simple responses) applies the JWT
authorizer's rules to the cookie's token and hands the person's claims to the
decision function in ``requestContext.authorizer.lambda``.

The function runs outside the VPC: it reaches nothing but Cognito's public JWKS
(HTTPS) and calls no AWS API, so its role holds only its log group and tracing
(``operator_contract.console_authorizer_role``). API Gateway's permission to run it
is a row of ``infra/operator_contract.py``, scoped to this authorizer.

No results cache: its key would be the whole Cookie header, and a cached "allow"
would outlive the token's ``exp`` by up to the cache's TTL; the verification is one
RSA signature check against keys cached per cold start, so a cache would save little.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_lambda as lambda_

from .base import FunctionSpec, LambdaFunction, lambda_role
from .logical_ids import Ids
from .operator_contract import CONSOLE_AUTHORIZER_FUNCTION_NAME, CONSOLE_AUTHORIZER_ROLE_NAME

if TYPE_CHECKING:
    from .stack import CadenciaStack

CONSOLE_AUTHORIZER_PACKAGE = "autorizar_console"
CONSOLE_AUTHORIZER_TIMEOUT_S = 5  # one JWKS fetch (3 s) at a cold start, then a signature check
IDENTITY_SOURCE = "$request.header.Cookie"


def add_console_authorizer(stack: CadenciaStack, issuer: str,
                           client_id: str) -> tuple[lambda_.Function, authorizers.HttpLambdaAuthorizer]:
    """The authorizer's function, and the HTTP API authorizer to attach to the console's routes."""
    parts = LambdaFunction(
        stack, role=lambda_role(stack, Ids.CONSOLE_AUTHORIZER_ROLE, CONSOLE_AUTHORIZER_ROLE_NAME,
                                "The console's cookie authorizer: its log group only", in_vpc=False),
        log_group_id=Ids.CONSOLE_AUTHORIZER_LOG_GROUP, function_name=CONSOLE_AUTHORIZER_FUNCTION_NAME)
    fn = parts.build(FunctionSpec(
        logical_id=Ids.CONSOLE_AUTHORIZER_FUNCTION,
        description="The operators' console: verifies the session cookie's Cognito access token",
        handler=f"{CONSOLE_AUTHORIZER_PACKAGE}.handler.lambda_handler",
        timeout=Duration.seconds(CONSOLE_AUTHORIZER_TIMEOUT_S), memory_size=256,
        environment={"COGNITO_ISSUER": issuer, "CONSOLE_CLIENT_ID": client_id},
        retry_attempts=0,  # API Gateway invokes it synchronously
    ), stack.assets)
    authorizer = authorizers.HttpLambdaAuthorizer(
        Ids.CONSOLE_AUTHORIZER, fn, authorizer_name="cadencia-console-cookie",
        identity_source=[IDENTITY_SOURCE], response_types=[authorizers.HttpLambdaResponseType.SIMPLE],
        results_cache_ttl=Duration.seconds(0))
    return fn, authorizer
