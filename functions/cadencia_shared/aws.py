"""boto3 clients with bounded timeouts and retries.

Defaults let a throttled call retry for far longer than a tool Lambda lives;
these bounds keep every AWS call inside the function's own timeout.
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

from pydantic import Field

from .settings import EnvSettings

_CONFIG = Config(connect_timeout=2, read_timeout=5, retries={"mode": "standard", "max_attempts": 3})


class AwsSettings(EnvSettings):
    region: str = Field("us-east-1", alias="AWS_REGION")
    # Set only locally (moto server). boto3 also reads it itself; keeping it here
    # makes it part of the settings that identify a cached client.
    endpoint_url: str | None = Field(None, alias="AWS_ENDPOINT_URL")


def client(service: str, settings: AwsSettings, *, config: Config | None = None) -> Any:
    return boto3.session.Session().client(
        service, region_name=settings.region, endpoint_url=settings.endpoint_url, config=config or _CONFIG
    )
