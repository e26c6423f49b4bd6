"""Framework authentication as a Mesos master does it: HTTP Basic, one secret per principal, from a file.

Authentication is **off** when the endpoint listens on a loopback address (the default, ``127.0.0.1``),
as a Mesos master does not authenticate frameworks unless asked, and **required** when it listens on any
other address, or when asked (``authenticate=True``, ``elastic mesos --authenticate``). Credentials are
read from a file in the format of the Mesos master's ``--credentials``::

    {"credentials": [{"principal": "alice", "secret": "..."}, {"principal": "bob", "secret": "..."}]}

A framework presents ``principal:secret`` as HTTP Basic authentication (pymesos:
``MesosSchedulerDriver(..., principal=..., secret=...)``). A framework subscribed by one principal can fail
over (subscribe again with its id) only as that principal.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import json
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from elastic.errors import ConfigError

__all__ = [
    "DEFAULT_PRINCIPAL",
    "check_credentials",
    "is_loopback",
    "principal_of",
    "read_credentials",
    "write_credentials",
]

DEFAULT_PRINCIPAL = "elastic"
"""Principal of the credential drawn when authentication is required and no credentials are given."""

_DUMMY = secrets.token_hex(16)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is a loopback address only this machine reaches."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_credentials(credentials: Mapping[str, str], where: str) -> dict[str, str]:
    """Return ``credentials`` (principal to secret) checked: at least one, non-empty strings, no ``:``.

    Raises
    ------
    ConfigError
        None given, or a principal or secret that is not a non-empty string, or a principal with ``:``.
    """
    if not credentials:
        raise ConfigError(f"{where}: no credentials; give at least one principal and its secret")
    out = {}
    for principal, secret in credentials.items():
        if not isinstance(principal, str) or not principal or ":" in principal:
            raise ConfigError(f"{where}: principal {principal!r} must be a non-empty string without ':'")
        if not isinstance(secret, str) or not secret:
            raise ConfigError(f"{where}: the secret of principal {principal!r} must be a non-empty string")
        out[principal] = secret
    return out


def read_credentials(path: str | Path) -> dict[str, str]:
    """Read a Mesos ``--credentials`` JSON file; return principal to secret.

    Raises
    ------
    ConfigError
        The file cannot be read, is not JSON of the expected shape, or names a principal twice.
    """
    where = f"credentials file {path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: cannot read it: {exc}") from None
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f'{where}: not JSON ({exc}); expected {{"credentials": [...]}}') from None
    listed = raw.get("credentials") if isinstance(raw, dict) else None
    if not isinstance(listed, list):
        raise ConfigError(f'{where}: expected {{"credentials": [{{"principal": ..., "secret": ...}}]}}')
    out: dict[str, str] = {}
    for i, item in enumerate(listed):
        if not isinstance(item, dict) or set(item) - {"principal", "secret"}:
            raise ConfigError(f'{where}: credentials[{i}] must be {{"principal": ..., "secret": ...}}')
        principal, secret = item.get("principal"), item.get("secret")
        if isinstance(principal, str) and principal in out:
            raise ConfigError(f"{where}: principal {principal!r} is given twice")
        out[principal] = secret  # type: ignore[index,assignment]  # checked below
    return check_credentials(out, where)


def write_credentials(directory: Path, credentials: Mapping[str, str]) -> Path:
    """Write ``credentials`` as a Mesos ``--credentials`` file (mode 0600) in ``directory``; return it."""
    path = directory / f"elastic-mesos-{secrets.token_hex(4)}.credentials"
    listed = [{"principal": p, "secret": s} for p, s in credentials.items()]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"credentials": listed}, fh, indent=2)
        fh.write("\n")
    return path


def principal_of(authorization: str, credentials: Mapping[str, str]) -> str | None:
    """Return the principal an ``Authorization`` header authenticates, or None (absent, malformed, wrong).

    The secret is compared in constant time, also for unknown principals.
    """
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    principal, colon, secret = decoded.partition(":")
    expected = credentials.get(principal)
    ok = hmac.compare_digest(secret.encode(), (expected or _DUMMY).encode())
    return principal if colon and expected is not None and ok else None
