"""The one place that makes an endpoint URL safe to show.

`llm.base_url` may carry `user:password@` (a proxy with basic auth). Every message,
log line, report field and cache file names the endpoint through `redact_url`, so
the password never leaves the config it was typed into.
"""
from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def redact_url(url: str | None) -> str | None:
    """`url` without its `user:password@` part (None and '' unchanged)."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:  # not parseable as a URL: cut anything up to an '@' all the same
        return url.rpartition("@")[2] if "@" in url else url
    if "@" not in parts.netloc:
        return url
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query, parts.fragment))


def scrub(text: str, url: str | None) -> str:
    """`text` with the credentials of `url` masked, for messages that quote a server or a library."""
    if not url:
        return text
    try:
        parts = urlsplit(url)
    except ValueError:
        return text
    if "@" in parts.netloc:
        text = text.replace(url, redact_url(url) or "")
        userinfo = parts.netloc.rpartition("@")[0]
        text = text.replace(userinfo + "@", "")
        secret = userinfo.partition(":")[2]
        if secret:
            text = text.replace(secret, "***")
    return text


def endpoint(base_url: str | None) -> str:
    """The endpoint as messages and cache entries name it: redacted, no trailing slash."""
    return (redact_url(base_url) or DEFAULT_BASE_URL).rstrip("/")
