"""Callback URLs as the Go Hades checks them (``net/url.Parse`` failures, then absolute, http/https, a host)."""

from __future__ import annotations

import ipaddress
import re

_CONTROL = re.compile("[\x00-\x1f\x7f]")
_BAD_ESCAPE = re.compile("%(?![0-9A-Fa-f]{2})")
# A host may %-escape only non-ASCII bytes (and %25, the IPv6 zone mark).
_BAD_HOST_ESCAPE = re.compile("%(?![0-9A-Fa-f]{2})|%(?!25)[0-7][0-9A-Fa-f]")
_BAD_HOST_CHAR = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,;=<>\"%\x80-\U0010ffff]")
_USERINFO = re.compile(r"[A-Za-z0-9\-._:~!$&'()*+,;=%@]*")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_PORT = re.compile(r"(:[0-9]*)?")


def validate_callback_url(url: str) -> str | None:
    """Why ``url`` cannot be a callback URL (the Go reason text), or None when it is fine.

    The checks are Go's: it must parse (as Go's url.Parse would), be absolute, use http or https (any case)
    and name a host. Beyond Go, ``http://:80/`` has no host, and a bracketed host must be a real IPv6 address.
    """
    parsed = _parse_url(url)
    if parsed is None:
        return "callback URL is not parseable"
    scheme, host = parsed
    if not scheme:
        return "callback URL must be absolute"
    if scheme.lower() not in ("http", "https"):
        return "callback URL scheme must be http or https"
    return None if host else "callback URL must include a host"


def _parse_url(url: str) -> tuple[str, str] | None:
    """Go's url.Parse reduced to what the checks need: (scheme, hostname), or None where Go would fail."""
    split = _split_reference(url)
    if split is None:
        return None
    scheme, rest = split
    if scheme and not rest.startswith("/"):
        return scheme, ""  # opaque, like mailto:x or http:host; Go does not look inside
    if not scheme and ":" in rest.partition("/")[0]:
        return None  # Go: first path segment in URL cannot contain colon
    host = ""
    if rest.startswith("//") and (scheme or not rest.startswith("///")):
        authority, slash, path = rest[2:].partition("/")
        parsed_host = _parse_authority(authority)
        if parsed_host is None:
            return None
        host, rest = parsed_host, slash + path
    return None if _BAD_ESCAPE.search(rest) else (scheme, host)


def _split_reference(url: str) -> tuple[str, str] | None:
    """(scheme, rest without query and fragment), checking what Go checks on the way."""
    if _CONTROL.search(url) or url.startswith(":"):
        return None  # control characters; "missing protocol scheme"
    url, _, fragment = url.partition("#")
    if _BAD_ESCAPE.search(fragment):
        return None
    match = _SCHEME.match(url)
    scheme, rest = (match[1], url[match.end() :]) if match else ("", url)
    return scheme, rest.partition("?")[0]  # Go does not check the query's escapes


def _parse_authority(authority: str) -> str | None:
    userinfo, at, hostport = authority.rpartition("@")
    host = _parse_host(hostport)
    if host is None or (at and (not _USERINFO.fullmatch(userinfo) or _BAD_ESCAPE.search(userinfo))):
        return None
    return host


def _parse_host(hostport: str) -> str | None:
    """The hostname of ``host[:port]`` or ``[ipv6][:port]``, or None when Go (1.26) would not parse it."""
    if hostport.startswith("["):
        literal, bracket, port = hostport[1:].rpartition("]")
        if not bracket or not _PORT.fullmatch(port) or not _is_ipv6_literal(literal):
            return None
        return literal
    host = hostport.partition(":")[0]
    if not _PORT.fullmatch(hostport[len(host) :]) or not _is_reg_name(host):
        return None
    return host


def _is_reg_name(host: str) -> bool:
    return not _BAD_HOST_CHAR.search(host) and not _BAD_HOST_ESCAPE.search(host)


def _is_ipv6_literal(literal: str) -> bool:
    address, zone_mark, zone = literal.partition("%25")  # RFC 6874 zone, e.g. [fe80::1%25eth0]
    if zone_mark and (_BAD_HOST_CHAR.search(zone) or _BAD_ESCAPE.search(zone)):
        return False
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return False
    return True
