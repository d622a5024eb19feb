"""AWS clients with bounded timeouts and retries, built with botocore alone.

Defaults let a throttled call retry for far longer than a tool Lambda lives;
these bounds keep every AWS call inside the function's own timeout.

botocore, not boto3: ``boto3.session.Session().client`` is botocore's
``create_client`` plus customizations for S3 and resources we do not use, and
importing ``boto3`` pulls ``s3transfer`` (about as much again as botocore) into
every cold start. Each call builds a fresh botocore session, as
boto3's ``Session()`` did: sessions are not thread-safe, the clients are.
"""

from __future__ import annotations

from typing import Any

from botocore.config import Config
from botocore.session import get_session

from pydantic import Field

from .settings import EnvSettings

_CONFIG = Config(connect_timeout=2, read_timeout=5, retries={"mode": "standard", "max_attempts": 3})


class AwsSettings(EnvSettings):
    region: str = Field("us-east-1", alias="AWS_REGION")
    # Set only locally (moto server). botocore also reads it itself; keeping it here
    # makes it part of the settings that identify a cached client.
    endpoint_url: str | None = Field(None, alias="AWS_ENDPOINT_URL")


def client(service: str, settings: AwsSettings, *, config: Config | None = None) -> Any:
    return get_session().create_client(
        service, region_name=settings.region, endpoint_url=settings.endpoint_url, config=config or _CONFIG
    )
