"""Callback URLs as the Go Hades checks them (``net/url.Parse`` failures, then absolute, http/https, a host)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import unquote

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


# -- where callbacks may go (ours, against SSRF) --------------------------------------------------------------

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
# Beyond what ``ipaddress`` calls private: carrier-grade NAT, which cloud networks use inside.
_SHARED_ADDRESS_SPACE = ipaddress.IPv4Network("100.64.0.0/10")


def callback_host(url: str) -> str:
    """The host a valid callback URL names, %-escapes decoded (an IPv6 literal without its brackets and zone)."""
    parsed = _parse_url(url)
    host = parsed[1] if parsed is not None else ""
    return unquote(host.partition("%25")[0])


def address_kind(address: Address) -> str | None:
    """What makes ``address`` internal (``"loopback"``, ``"private"``...), or None for a public address.

    An IPv4 address mapped into IPv6 (``::ffff:127.0.0.1``) is judged as the IPv4 address it reaches.
    """
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    kinds = (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("unspecified", address.is_unspecified),
        ("unique-local" if address.version == 6 else "private", address.is_private),
        ("shared (carrier-grade NAT)", address in _SHARED_ADDRESS_SPACE),
        ("reserved", address.is_reserved),
    )
    return next((kind for kind, matches in kinds if matches), None)


def _ip(text: str) -> Address | None:
    try:
        return ipaddress.ip_address(text.strip("[]").partition("%")[0])
    except ValueError:
        return None


@dataclass(frozen=True)
class CallbackPolicy:
    """Where ``callback_url`` and ``status_callback_url`` may point (``CALLBACK_ALLOWED_HOSTS``,
    ``CALLBACK_DENY_PRIVATE``); the default allows any host, as the Go Hades does.

    A target is allowed when its host name matches one of ``names`` (exact, or ``*.example.com`` for any name
    below ``example.com``), or when its address lies in one of ``networks``. With ``deny_private``, an address that
    is loopback, private, link-local (169.254.169.254, the cloud metadata service, included), unique-local,
    multicast or otherwise internal is refused unless one of ``networks`` names it explicitly.
    """

    names: tuple[str, ...] = ()
    networks: tuple[Network, ...] = ()
    deny_private: bool = False

    @classmethod
    def parse(cls, allowed: str, deny_private: bool = False) -> CallbackPolicy:
        """From the settings' text; raises ValueError naming an entry that is neither a name nor a CIDR range."""
        names, networks = [], []
        for entry in (part.strip().lower().rstrip(".") for part in allowed.split(",")):
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                if not _HOST_PATTERN.fullmatch(entry):
                    raise ValueError(
                        f"CALLBACK_ALLOWED_HOSTS: {entry!r} is neither a host name, a *.domain pattern nor a CIDR range"
                    ) from None
                names.append(entry)
        return cls(tuple(names), tuple(networks), deny_private)

    @property
    def restricts(self) -> bool:
        """Whether any target is refused at all."""
        return bool(self.names or self.networks or self.deny_private)

    def host_refusal(self, host: str) -> str | None:
        """Why a URL naming ``host`` is refused before anything is resolved, or None.

        A host name that no entry names passes here only while CIDR ranges are allowed (it may resolve into one);
        every address is checked again when a delivery connects (:meth:`address_refusal`).
        """
        address = _ip(host)
        if address is not None:
            return self.address_refusal(host, address)
        if (self.names or self.networks) and not self.names_host(host) and not self.networks:
            return f"callback URL host {host} is not allowed (CALLBACK_ALLOWED_HOSTS)"
        return None

    def address_refusal(self, host: str, address: Address | str) -> str | None:
        """Why connecting to ``address``, which ``host`` resolved to, is refused, or None."""
        ip = _ip(address) if isinstance(address, str) else address
        if ip is None:
            return f"callback URL host {host} resolved to {address!r}, which is not an IP address"
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if any(ip in network for network in self.networks):
            return None
        target = f"callback URL host {host}" if str(ip) == host else f"callback URL host {host} ({ip})"
        kind = address_kind(ip) if self.deny_private else None
        if kind is not None:
            return f"{target} is a {kind} address (CALLBACK_DENY_PRIVATE)"
        if (self.names or self.networks) and not self.names_host(host):
            return f"{target} is not allowed (CALLBACK_ALLOWED_HOSTS)"
        return None

    def names_host(self, host: str) -> bool:
        """Whether a name entry allows ``host`` (case and a trailing dot do not matter)."""
        host = host.lower().rstrip(".")
        return any(host == name or (name.startswith("*.") and host.endswith(name[1:])) for name in self.names)


_HOST_PATTERN = re.compile(r"(\*\.)?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*")
