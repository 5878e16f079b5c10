"""obstore stores from the storage options users give, by ``pyarrow.fs``'s names.

verstore has always taken ``pyarrow.fs``'s option names (docs/spark.md, "Credentials"), and
Spark's public-option list is by those names. Each supported option maps to obstore's; an
option that only tuned ``pyarrow.fs`` (lazy opens, directory markers, bucket creation) means
nothing here and is ignored; any other is a ``ValueError`` naming it (never its value), since
a credential silently dropped would send requests as someone else. Credentials not given come
from the storage's own chain on each machine: for S3 the ``AWS_*`` environment variables,
web identity (IRSA), the container and instance metadata; for GCS the application default
credentials; for Azure the environment, workload identity and managed identity.
"""

from __future__ import annotations

from typing import Any

#: ``pyarrow.fs`` options with no meaning for obstore (how pyarrow opens, marks, creates).
_IGNORED = frozenset(
    {
        "allow_delayed_open",
        "background_writes",
        "allow_bucket_creation",
        "allow_bucket_deletion",
        "check_directory_existence_before_creation",
        "load_frequency",
        "default_bucket_location",
        "project_id",
        "dfs_storage_authority",
        "dfs_storage_scheme",
    }
)
_S3 = {
    "access_key": "access_key_id",
    "secret_key": "secret_access_key",
    "session_token": "session_token",
    "region": "region",
    "role_arn": "role_arn",
    "session_name": "role_session_name",
    "force_virtual_addressing": "virtual_hosted_style_request",
    "anonymous": "skip_signature",
}
_GCS = {"anonymous": "skip_signature", "access_token": "bearer_token"}
_AZURE = {
    "account_name": "account_name",
    "account_key": "account_key",
    "client_id": "client_id",
    "client_secret": "client_secret",
    "tenant_id": "tenant_id",
    "sas_token": "sas_key",
}


def make_store(scheme: str, bucket: str, options: dict[str, Any]) -> tuple[Any, str]:
    """An obstore store for ``bucket`` of ``scheme``, and the storage's name for messages.

    Raises:
        ValueError: An option this storage does not support.
    """
    from obstore.exceptions import BaseError

    try:
        return _make(scheme, bucket, options)
    except BaseError as e:  # obstore names the setting at fault, never its value
        raise ValueError(f"{scheme}://{bucket}: {str(e).splitlines()[0]}") from None


def _make(scheme: str, bucket: str, options: dict[str, Any]) -> tuple[Any, str]:
    from obstore.store import AzureStore, GCSStore, S3Store

    client: Any = {}
    options = dict(options)
    endpoint = _endpoint(options, client)
    for key, to in (("connect_timeout", "connect_timeout"), ("request_timeout", "timeout")):
        if key in options:
            client[to] = f"{float(options.pop(key))}s"
    if scheme in ("s3", "s3a"):
        config = _mapped(options, _S3, "S3")
        if endpoint:
            config["endpoint"] = endpoint
        return S3Store(bucket, config=config, client_options=client), "S3"
    if scheme in ("gs", "gcs"):
        config = _mapped(options, _GCS, "GCS")
        if endpoint:
            config["base_url"] = endpoint
        return GCSStore(bucket, config=config, client_options=client), "GCS"
    config = _mapped(options, _AZURE, "Azure")
    if endpoint:
        config["endpoint"] = endpoint
    return AzureStore(bucket, config=config, client_options=client), "Azure Blob Storage"


def _endpoint(options: dict[str, Any], client: dict[str, Any]) -> str | None:
    """The endpoint URL of ``endpoint_override`` (S3, GCS) or ``blob_storage_authority``
    (Azure) with its scheme; plain HTTP allowed when the scheme says so."""
    authority = options.pop("endpoint_override", None)
    authority = options.pop("blob_storage_authority", None) or authority
    scheme = options.pop("scheme", None)
    scheme = options.pop("blob_storage_scheme", None) or scheme or "https"
    if authority is None:
        return None
    if scheme == "http":
        client["allow_http"] = True
    authority = str(authority)
    return authority if "://" in authority else f"{scheme}://{authority}"


def _mapped(options: dict[str, Any], names: dict[str, str], storage: str) -> Any:
    """obstore's config of ``options``; ``ValueError`` naming an option it cannot take."""
    config: dict[str, Any] = {}
    for key, value in options.items():
        if key in names:
            config[names[key]] = value
        elif key not in _IGNORED:
            raise ValueError(
                f"storage option {key!r} is not supported for {storage} "
                f"(supported: {', '.join(sorted({*names, 'endpoint_override', 'scheme'}))})"
            )
    return config


__all__ = ["make_store"]
