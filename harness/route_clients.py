"""SDK clients and credentials for the routes that are not a plain key and base URL: Claude on
Bedrock and Vertex (the `anthropic` SDK's own `AnthropicBedrock` / `AnthropicVertex` clients), and
Azure OpenAI's two ways to authenticate.

Everything is read from the environment the router was given (not the process's), so a test or an
eval worker can point a route anywhere without touching `os.environ`.
"""

from __future__ import annotations

from typing import Any, Mapping

from hitrate.harness.models import ModelSpec, ModelSpecError

BEDROCK_EXTRA = "bedrock"
VERTEX_EXTRA = "vertex"


def _need(module: str, extra: str, what: str) -> None:
    try:
        __import__(module)
    except ImportError:
        raise ModelSpecError(f"{what} needs {module}: pip install 'hitrate[{extra}]'") from None


def bedrock_client(spec: ModelSpec, env: Mapping[str, str], timeout_s: float) -> Any:
    """`AnthropicBedrock` for `spec`: a Bedrock API key (AWS_BEARER_TOKEN_BEDROCK) is sent as a
    bearer token; otherwise requests are signed (SigV4) with the AWS keys in the environment or
    the named AWS_PROFILE. Bedrock streams in AWS's binary event-stream framing, which the SDK
    decodes with botocore."""
    import anthropic

    _need("botocore", BEDROCK_EXTRA, spec.label)
    common: dict[str, Any] = dict(aws_region=spec.region, base_url=spec.base_url, max_retries=0, timeout=timeout_s)
    token = env.get("AWS_BEARER_TOKEN_BEDROCK")
    if token:
        return anthropic.AnthropicBedrock(api_key=token, **common)
    _need("boto3", BEDROCK_EXTRA, spec.label)
    access, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    profile = env.get("AWS_PROFILE")
    if not (access and secret) and not profile:
        raise ModelSpecError(
            f"{spec.label} needs AWS credentials: set AWS_BEARER_TOKEN_BEDROCK (a Bedrock API key), "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
        )
    # Retries are ours (hitrate.harness.retry), as on every route.
    return anthropic.AnthropicBedrock(
        aws_access_key=access if not profile else None,
        aws_secret_key=secret if not profile else None,
        aws_session_token=env.get("AWS_SESSION_TOKEN") if not profile else None,
        aws_profile=profile,
        **common,
    )


def vertex_client(spec: ModelSpec, env: Mapping[str, str], timeout_s: float) -> Any:
    """`AnthropicVertex` for `spec`: VERTEX_ACCESS_TOKEN when set (an OAuth access token, e.g.
    `gcloud auth print-access-token`), else Google's application default credentials, which the
    SDK reads with google-auth."""
    import anthropic

    token = env.get("VERTEX_ACCESS_TOKEN")
    if not token:
        _need("google.auth", VERTEX_EXTRA, spec.label)
    return anthropic.AnthropicVertex(
        region=spec.region, project_id=spec.project, access_token=token or None, base_url=spec.base_url,
        max_retries=0, timeout=timeout_s,
    )


def anthropic_client_for(spec: ModelSpec, env: Mapping[str, str], timeout_s: float) -> Any | None:
    """The SDK client an Anthropic-wire route needs beyond key + base URL; None for the others."""
    if spec.provider == "bedrock":
        return bedrock_client(spec, env, timeout_s)
    if spec.provider == "vertex":
        return vertex_client(spec, env, timeout_s)
    return None


def openai_auth_for(spec: ModelSpec, env: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """(bearer key for the OpenAI SDK, extra headers) of an Azure OpenAI route.

    Azure authenticates a key with the `api-key` header (every API version, and API Management
    gateways in front of Azure expect it there); the v1 API also takes a Microsoft Entra ID token
    as `Authorization: Bearer`. With a key, the SDK's bearer carries the key too, as Azure's own
    v1 examples do (`OpenAI(api_key=AZURE_OPENAI_API_KEY, base_url=…/openai/v1/)`)."""
    key = env.get("AZURE_OPENAI_API_KEY")
    if key:
        return key, {"api-key": key}
    token = env.get("AZURE_OPENAI_AD_TOKEN")
    if token:
        return token, {}
    raise ModelSpecError(f"{spec.label} needs a credential: set AZURE_OPENAI_API_KEY, or AZURE_OPENAI_AD_TOKEN (Entra ID)")
