"""Secret redaction for the dashboard, as the Go Hades does it (``shared/redact``, contract §6.3).

Metadata values are masked whole, by key name or by what the value looks like. Free text (step scripts, failure
reasons) keeps its shape: only the secret spans inside it become :data:`MASK`.

Every pattern stays linear on scripts of many megabytes although Python's ``re`` backtracks: a pattern is tried only
where a run of its characters begins (a lookbehind turns every other position away at once), and it reads runs
possessively, so no run is read twice. Where the Go rules would leave part of a secret visible, the rules here mask
more; each such place says why.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

MASK = "••••••"
"""What a secret is replaced with: six U+2022 bullets."""

DEFAULT_KEY_PATTERN = (
    r"token|passwd|password|pwd|secret|api[_-]?key|access[_-]?key|credential|auth|private|cert|signing|session"
)
"""Metadata keys that conventionally hold secrets, matched case-insensitively anywhere in the key."""

# The keys that mark an assignment in free text as sensitive: the metadata list without ``cert``, which in scripts
# mostly names files and flags (``--cacert=/etc/ssl/ca.pem``, ``update-ca-certificates``), not secrets.
_SCRIPT_KEYWORDS = (
    r"token|secret|passwd|password|pwd|api[_-]?key|access[_-]?key|credential|auth|private|signing|session"
)

_ENTROPY_THRESHOLD = 3.5  # bits per character
_LONG_TOKEN_LENGTH = 24
_MAX_PASSES = 4  # one pass is normally final (see _scrub); the cap bounds the time on hostile input


class RedactMode(StrEnum):
    """How much of the metadata to mask (``SECRET_REDACT_MODE``); scripts are scrubbed the same in both modes."""

    SMART = "smart"
    ALL = "all"

    @classmethod
    def parse(cls, value: str) -> RedactMode:
        """The mode ``value`` names, SMART for anything unrecognised.

        Beyond Go, case and surrounding blanks are ignored: an operator who writes ``ALL`` asked for everything to be
        masked, and reading it as ``smart`` (as Go does) would show values they meant to hide.
        """
        try:
            return cls(value.strip().lower())
        except ValueError:
            return cls.SMART


# --- what a secret looks like ---------------------------------------------------------------------------------------

# Where a value or a password ends: Go's ``\s``, which is ASCII. Python's ``\s`` also stops at a no-break space and
# the like, which would leave the rest of a password showing where Go masks it.
_GO_BLANK = r"\t\n\f\r\ "

# ``scheme://user:password@``. The scheme may start only where a run of scheme characters starts (so a long word
# costs one try, not one per letter) and needs a letter somewhere, as Go's ``[a-zA-Z][a-zA-Z0-9+.-]*`` does. Beyond
# Go, and as URL parsers read it: the password runs to the *last* ``@`` of the authority (``p@ssw0rd@host`` would
# otherwise leave ``ssw0rd`` showing), the user may be empty (``https://:token@host``) or contain ``@``.
_URL_CREDENTIALS = re.compile(
    rf"""
    (?P<userinfo>
        (?<![A-Za-z0-9+.\-]) [0-9+.\-]*+ [A-Za-z] [A-Za-z0-9+.\-]*+ ://   # scheme
        [^/{_GO_BLANK}:]*+ :                                              # user
    )
    (?!@) (?:[^/{_GO_BLANK}@]*+ @)++                                      # password, through the last @
    """,
    re.VERBOSE,
)

# A whole PEM block; beyond Go, a BEGIN that never ends is masked to the end of the text, since what follows it is
# the key material.
_PEM_BLOCK = re.compile(r"-----BEGIN(?:[^-]*+-----.*?-----END[^-]*+-----|.*)", re.DOTALL)

_JWT_SEGMENT = r"[A-Za-z0-9_\-]{6,}+"
_JWT = re.compile(rf"{_JWT_SEGMENT}\.{_JWT_SEGMENT}\.{_JWT_SEGMENT}")
# Beyond Go, a longer dotted chain is masked whole: a JWT glued to a dotted prefix (``release.<jwt>``) would otherwise
# be cut after its third segment and show its signature.
_JWT_INLINE = re.compile(rf"(?<![A-Za-z0-9_\-]){_JWT_SEGMENT}(?:\.{_JWT_SEGMENT}){{2,}}+")

_TOKEN_CHARS = r"A-Za-z0-9+/=_\-"
_TOKEN = re.compile(rf"[{_TOKEN_CHARS}]+")
_LONG_TOKEN = re.compile(rf"(?<![{_TOKEN_CHARS}])[{_TOKEN_CHARS}]{{{_LONG_TOKEN_LENGTH},}}+")
_TOKEN_NAME = re.compile(r"-*[A-Za-z_][A-Za-z0-9_\-]*")

# A sensitive ``KEY=VALUE`` / ``KEY: VALUE`` / ``export KEY=...`` / ``set KEY=...`` / ``-e KEY=...``; the value is
# masked, its opening quote kept. ``export``, ``set`` and ``-e`` need no rule of their own: the key starts after the
# blank that follows them.
# Go lets a key start only at the beginning or after a blank or ``; & | (``. Beyond Go, it may also start after a
# quote (``-H "Authorization: ..."``, JSON ``{"password": ...}``), ``?`` (``?access_token=...``) and ``,``. Not after
# ``/`` (image tags such as ``org/session-manager:1.0``) nor ``$`` or ``{`` (``"$AUTH_MODE" = oauth`` and
# ``${TOKEN:-}`` read a variable, they do not assign one).
# Beyond Go, a quoted value is masked up to its closing quote (Go stops at the first blank, leaving the rest of
# ``"two words"`` showing), a JSON key's closing quote may sit before the colon, and an HTTP auth scheme is kept
# while the credential after it is masked (Go masks the word ``Bearer`` and shows the credential).
_ASSIGNMENT = re.compile(
    rf"""
    (?P<lead>
        (?<![^\s;&|(?,"'])                     # a key starts here (or at the very start),
        (?=[\w.\-]++ ["']? \s*+ [:=])           # is assigned to (a cheap test that rules out most words),
        (?=[\w.\-]*?(?:{_SCRIPT_KEYWORDS}))   # and names a secret
        [\w.\-]++ ["']? \s*+ [:=] \s*+
        (?: (?:bearer|basic|digest|token) [\ \t]++ )?
    )
    (?:
        (?P<double>") (?:[^"\\]++ | \\[\s\S])++ (?=")
      | (?P<single>') [^']++ (?=')
      | (?P<bare>["']?) [^{_GO_BLANK}"';]++
    )
    """,
    re.IGNORECASE | re.VERBOSE,
)


def looks_like_secret(value: str) -> bool:
    """Whether a metadata value is a secret whatever its key: URL credentials, a PEM block, a JWT or a long token."""
    return bool(
        _URL_CREDENTIALS.search(value)
        or "-----BEGIN" in value
        or _JWT.fullmatch(value)
        or (_TOKEN.fullmatch(value) and _is_high_entropy(value))
    )


def _is_high_entropy(token: str) -> bool:
    return len(token) >= _LONG_TOKEN_LENGTH and _entropy(token) >= _ENTROPY_THRESHOLD


def _entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    size = len(text)
    return -sum(count / size * math.log2(count / size) for count in Counter(text).values())


# --- scrubbing free text --------------------------------------------------------------------------------------------


def _scrub(text: str) -> str:
    """``text`` with every secret span masked, so that scrubbing it again changes nothing.

    One pass is final for every step but the URL one: a later step may mask the ``/`` or ``@`` that kept a URL
    password from being seen (a token, or an assignment's value, inside the authority). The other steps are stable on
    their own output and on the masks of the steps after them, so only URLs are re-checked, at a fraction of the cost
    of a second pass, and the whole pass repeats only when they changed.
    """
    for _ in range(_MAX_PASSES):
        text = _scrub_once(text)
        if _mask_url_passwords(text) == text:
            break
    return text


def _scrub_once(text: str) -> str:
    # Go masks PEM blocks third; here they go first. In ``PRIVATE_KEY: -----BEGIN ...`` the assignment step would
    # mask only the word ``-----BEGIN``, after which the block is no longer recognised and its lines show.
    # Each step is skipped when the text lacks a character it needs; the checks run at C speed.
    if "-----BEGIN" in text:
        text = _PEM_BLOCK.sub(MASK, text)
    text = _mask_url_passwords(text)
    if "=" in text or ":" in text:
        text = _ASSIGNMENT.sub(_mask_assignment, text)
    if "." in text:
        text = _JWT_INLINE.sub(MASK, text)
    return _LONG_TOKEN.sub(_mask_long_token, text)


_URL_QUERY = re.compile(rf"(?P<path>://[^?#{_GO_BLANK}\"']*+)\?[^#{_GO_BLANK}\"']*+")


def mask_urls(text: str) -> str:
    """``text`` with every URL's password and query string masked, for lines about requests that Hades did not word
    itself (a library's log of the URL it called): a callback URL may carry a password or a token in its query."""
    if "://" not in text:
        return text
    return _URL_QUERY.sub(rf"\g<path>?{MASK}", _mask_url_passwords(text))


def _mask_url_passwords(text: str) -> str:
    return _URL_CREDENTIALS.sub(rf"\g<userinfo>{MASK}@", text) if "://" in text else text


def _mask_assignment(match: re.Match[str]) -> str:
    quote = match["double"] or match["single"] or match["bare"] or ""
    return f"{match['lead']}{quote}{MASK}"


def _mask_long_token(match: re.Match[str]) -> str:
    """Go's rule judges the whole run; beyond Go, ``NAME=<token>`` is also judged by the token alone.

    ``=`` is a token character, so ``BUILD_ID=<token>`` is one run and the name can pull its entropy under the
    threshold; a plain name keeps its place, the token goes. A name that would itself be masked once it stands alone
    goes too, or a second scrub would mask it.
    """
    token = match[0]
    if _is_high_entropy(token):
        return MASK
    name, equals, value = token.partition("=")
    if equals and _TOKEN_NAME.fullmatch(name) and _is_high_entropy(value):
        return MASK if _is_high_entropy(f"{name}=") else f"{name}={MASK}"
    return token


# --- the redactor ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, init=False)
class Redactor:
    """Masks secrets in job metadata, step scripts and failure reasons before the dashboard shows them."""

    mode: RedactMode
    key_pattern: re.Pattern[str]

    def __init__(self, mode: str | RedactMode = RedactMode.SMART, key_patterns: str = "") -> None:
        """``mode`` is ``SECRET_REDACT_MODE``; ``key_patterns`` is ``SECRET_KEY_PATTERNS`` (empty: the default).

        The key pattern always matches case-insensitively, as the default does. Go honours case in a custom pattern
        unless it starts with ``(?i)``; here ``token`` also catches ``GITHUB_TOKEN``, which is what an operator means.
        Raises ValueError, naming ``SECRET_KEY_PATTERNS``, if the pattern does not compile.
        """
        pattern = key_patterns or DEFAULT_KEY_PATTERN
        try:
            compiled = re.compile(pattern, re.IGNORECASE)
        except re.error as error:
            raise ValueError(f"SECRET_KEY_PATTERNS is not a valid regular expression ({error}): {pattern!r}") from error
        object.__setattr__(self, "mode", RedactMode.parse(mode))
        object.__setattr__(self, "key_pattern", compiled)

    def value(self, key: str, value: str) -> str:
        """What the dashboard shows for one metadata entry: the value, or :data:`MASK`. Empty stays empty."""
        if not value:
            return value
        if self.mode is RedactMode.ALL or self.key_pattern.search(key) or looks_like_secret(value):
            return MASK
        return value

    def metadata(self, metadata: Mapping[str, str] | None) -> dict[str, str]:
        """A redacted copy of ``metadata`` with every key kept; never None, so the API never sends ``null``."""
        return {key: self.value(key, value) for key, value in (metadata or {}).items()}

    def script(self, text: str) -> str:
        """A step script with its secret spans masked; the mode does not apply (only metadata is masked whole)."""
        return _scrub(text)

    def text(self, text: str) -> str:
        """Free text such as a failure reason, scrubbed as a script is."""
        return _scrub(text)
