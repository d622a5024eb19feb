"""The operators' HTTP API: who acts is proven by the platform, not claimed in a body.

    person ─► Cognito user pool (MFA required; groups aprovadores, atendentes, supervisores)
           ─► access token ─► HTTP API, JWT authorizer on every route (issuer = the pool,
              audience = its app client) ─► the function (Lambda proxy, payload 2.0), which
              reads the verified claims from requestContext.authorizer.jwt.claims and checks
              the route's group in code (cadencia_shared.identity)

The console's pages (``CONSOLE_ROUTES``) are routes of the same API on the decision
function: behind the cookie authorizer (``infra/console_authorizer.py``: the same token,
read from the ``cadencia_sessao`` cookie, verified by the same rules), the sign-in page
behind none. Routes come from ``orchestrator/api_routes.py`` (the local stack's adapter
reads the same rows). Each integration adds the function's only API permission, scoped by
``aws:SourceArn`` to this API's routes. The one other path to these functions is
break-glass direct invocation (``infra/operator_contract.py``: no role of this stack may,
only a principal the deployer's own administrators grant it, outside the stack); what it
decides or sends is audited as ``via = quebra_de_vidro``. Why a JWT authorizer rather than IAM
authorization: docs/decisions/operator-identity.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import CfnOutput, Duration, RemovalPolicy
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs

from cadencia_shared.identity import GROUPS
from orchestrator.api_routes import AUTH_COOKIE, AUTH_JWT, AUTH_NONE, CONSOLE_ROUTES, ROUTES

from .base import acknowledge, pin
from .console_authorizer import add_console_authorizer
from .contract import Ids

if TYPE_CHECKING:
    from .stack import CadenciaStack

TOKEN_VALIDITY = Duration.hours(1)
API_LOG_RETENTION = logs.RetentionDays.ONE_MONTH  # as every log group of the stack


def add_operator_api(stack: CadenciaStack, functions: dict[str, lambda_.IFunction]) -> apigw.HttpApi:
    """The user pool, the HTTP API and its routes."""
    pool = cognito.UserPool(
        stack, Ids.OPERATOR_POOL, user_pool_name="cadencia-operadores", self_sign_up_enabled=False,
        sign_in_aliases=cognito.SignInAliases(username=True, email=True),
        mfa=cognito.Mfa.REQUIRED, mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
        password_policy=cognito.PasswordPolicy(min_length=14, require_digits=True, require_lowercase=True,
                                               require_uppercase=True, require_symbols=True,
                                               temp_password_validity=Duration.days(3)),
        # Removed with the stack, like every other resource (the ordered teardown leaves nothing);
        # the people in it are re-created by an administrator.
        account_recovery=cognito.AccountRecovery.EMAIL_ONLY, removal_policy=RemovalPolicy.DESTROY,
    )
    pin(pool, Ids.OPERATOR_POOL)
    acknowledge(pool, "AwsSolutions-COG8",
                "The Plus feature plan (threat protection) is billed per monthly active user; "
                "this pool holds a few staff, "
                "the pool requires TOTP MFA for every operator, has no self sign-up, and every decision is audited")
    for group in GROUPS:
        cognito.CfnUserPoolGroup(stack, f"OperatorGroup{group.capitalize()}", user_pool_id=pool.user_pool_id,
                                 group_name=group, description=f"Cadência operators: {group}")
    client = pool.add_client(
        Ids.OPERATOR_POOL_CLIENT, user_pool_client_name="cadencia-console", generate_secret=False,
        auth_flows=cognito.AuthFlow(user_srp=True), prevent_user_existence_errors=True,
        access_token_validity=TOKEN_VALIDITY, id_token_validity=TOKEN_VALIDITY,
        refresh_token_validity=Duration.hours(12), enable_token_revocation=True,
    )
    issuer = f"https://cognito-idp.{stack.region}.amazonaws.com/{pool.user_pool_id}"
    jwt = authorizers.HttpJwtAuthorizer("OperatorJwtAuthorizer", issuer, jwt_audience=[client.user_pool_client_id],
                                        authorizer_name="cadencia-operadores-jwt")
    api = apigw.HttpApi(stack, Ids.OPERATOR_API, api_name="cadencia-operadores", default_authorizer=jwt,
                        create_default_stage=True)
    _access_log(stack, api)
    _, cookie = add_console_authorizer(stack, issuer, client.user_pool_client_id)
    route_authorizer: dict[str, apigw.IHttpRouteAuthorizer] = {
        AUTH_JWT: jwt, AUTH_COOKIE: cookie, AUTH_NONE: apigw.HttpNoneAuthorizer()}
    for route in ROUTES + CONSOLE_ROUTES:
        integration = integrations.HttpLambdaIntegration(
            f"Integration{_pascal_route(route.route_key)}", functions[route.function],
            payload_format_version=apigw.PayloadFormatVersion.VERSION_2_0)
        added = api.add_routes(path=route.path, methods=[apigw.HttpMethod(route.method)], integration=integration,
                               authorizer=route_authorizer[route.auth])
        if route.auth == AUTH_NONE:
            for found in added:
                acknowledge(found, "AwsSolutions-APIG4",
                            "The console's sign-in page and form: reachable before a session exists by design; "
                            "they only render the form and set the session cookie, which the cookie authorizer "
                            "verifies on every other console route (docs/decisions/console-auth.md)")
    pin(api.node.find_child(Ids.CONSOLE_AUTHORIZER), Ids.CONSOLE_AUTHORIZER)
    CfnOutput(stack, "OperatorApiUrl", value=api.api_endpoint)
    CfnOutput(stack, "OperatorUserPoolId", value=pool.user_pool_id)
    CfnOutput(stack, "OperatorUserPoolClientId", value=client.user_pool_client_id)
    return api


def _pascal_route(route_key: str) -> str:
    return "".join(part.capitalize() for part in
                   route_key.replace("/", " ").replace("{", " ").replace("}", " ").split())


def _access_log(stack: CadenciaStack, api: apigw.HttpApi) -> None:
    """Every request to the API in a log (who, route, status; never the body)."""
    group = logs.LogGroup(stack, Ids.OPERATOR_API_LOG_GROUP, retention=API_LOG_RETENTION,
                          removal_policy=RemovalPolicy.DESTROY)
    pin(group, Ids.OPERATOR_API_LOG_GROUP)
    stage = api.default_stage
    assert stage is not None
    cfn_stage = stage.node.default_child
    assert isinstance(cfn_stage, apigw.CfnStage)
    cfn_stage.access_log_settings = apigw.CfnStage.AccessLogSettingsProperty(
        destination_arn=group.log_group_arn,
        # sub: the JWT authorizer's; consoleSub: the cookie authorizer's context (console pages).
        format='{"requestId":"$context.requestId","sub":"$context.authorizer.claims.sub",'
               '"consoleSub":"$context.authorizer.sub",'
               '"routeKey":"$context.routeKey","status":"$context.status",'
               '"authorizerError":"$context.authorizer.error","requestTime":"$context.requestTimeEpoch"}')
    cfn_stage.default_route_settings = apigw.CfnStage.RouteSettingsProperty(
        throttling_burst_limit=20, throttling_rate_limit=10)
