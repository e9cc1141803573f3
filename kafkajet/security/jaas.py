"""Java's `sasl.jaas.config` syntax, for users moving a Java client's configuration over:

    org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s\\"cret";

One login module entry (as Kafka requires of sasl.jaas.config): a class name, a control flag, options as
key=value with double-quoted values (backslash escapes, as java.io.StreamTokenizer reads them) or bare words,
and a terminating ";". // and /* */ comments are skipped, as Kafka's JaasConfig does.

Error messages give positions, never text from the options: a value may be a password, and a missing quote
can turn part of one into what looks like an option name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkajet.config import SASL
from kafkajet.errors import ConfigError

# The login modules of config.SASL's mechanisms (which name them) this parser reads.
PLAIN_LOGIN_MODULE = SASL["PLAIN"].login_module
SCRAM_LOGIN_MODULE = SASL["SCRAM-SHA-256"].login_module
OAUTHBEARER_LOGIN_MODULE = SASL["OAUTHBEARER"].login_module
# Java's JDK module for Kerberos (GSSAPI): keyTab=, principal=, useKeyTab=, storeKey= options.
KRB5_LOGIN_MODULE = SASL["GSSAPI"].login_module
LOGIN_MODULES = (PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, OAUTHBEARER_LOGIN_MODULE, KRB5_LOGIN_MODULE)
FLAGS = ("required", "requisite", "sufficient", "optional")

_KEY = "sasl.jaas.config"
# StreamTokenizer escapes; any other escaped character stands for itself (\q -> q), as in Java.
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "a": "\a", "v": "\v"}
_OCTAL = "01234567"


@dataclass(frozen=True)
class JaasConfig:
    module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        # Option values may be secrets: show the names only.
        return f"JaasConfig(module={self.module!r}, flag={self.flag!r}, options={sorted(self.options)})"


def _is_word_char(c: str) -> bool:
    # StreamTokenizer's word constituents plus Kafka's additions (- _ $) and the number characters (digits
    # and ".") that may continue a word, so class names like org.apache.x.Y read as one word.
    return c.isalnum() or c in "-_$." or ord(c) >= 128


class _Tokens:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> ConfigError:
        return ConfigError(f"{_KEY}: {what} at character {self.pos}")

    def skip_blank(self) -> None:
        text = self.text
        while self.pos < len(text):
            c = text[self.pos]
            if c.isspace():
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("unterminated /* comment")
                self.pos = end + 2
            else:
                return

    def peek(self) -> str:
        self.skip_blank()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def word(self, what: str) -> str:
        self.skip_blank()
        start = self.pos
        while self.pos < len(self.text) and _is_word_char(self.text[self.pos]):
            self.pos += 1
        if self.pos == start:
            raise self.fail(f"expected {what}")
        return self.text[start:self.pos]

    def quoted(self) -> str:
        text = self.text
        start = self.pos
        self.pos += 1  # the opening quote
        out: list[str] = []
        while self.pos < len(text):
            c = text[self.pos]
            if c == '"':
                self.pos += 1
                return "".join(out)
            if c == "\\":
                if self.pos + 1 >= len(text):
                    break
                out.append(self._escape())
                continue
            if c in "\r\n":
                break  # StreamTokenizer ends a quoted string at a line end: a missing quote
            out.append(c)
            self.pos += 1
        self.pos = start
        raise self.fail("unterminated quoted value")

    def _escape(self) -> str:
        """The character of the escape at self.pos (a backslash), moving past it. Octal as StreamTokenizer:
        up to three digits, the third only if the first is 0-3 (so the value fits a byte)."""
        text = self.text
        e = text[self.pos + 1]
        if e in _OCTAL:
            end = self.pos + 2
            limit = self.pos + (4 if e <= "3" else 3)
            while end < min(limit, len(text)) and text[end] in _OCTAL:
                end += 1
            value = int(text[self.pos + 1:end], 8)
            self.pos = end
            return chr(value)
        self.pos += 2
        return _ESCAPES.get(e, e)

    def value(self) -> str:
        if self.peek() == '"':
            return self.quoted()
        return self.word("an option value")


def parse_jaas_config(text: str) -> JaasConfig:
    """ConfigError for anything but exactly one well-formed entry of a known Kafka login module."""
    if not isinstance(text, str):
        raise ConfigError(f"{_KEY}: expected a string, got {type(text).__name__}")
    tokens = _Tokens(text)
    if not tokens.peek():
        raise ConfigError(f"{_KEY} is empty")
    module = tokens.word("a login module class name")
    if module not in LOGIN_MODULES:
        raise ConfigError(f"{_KEY}: login module {module!r} is not supported; use one of {', '.join(LOGIN_MODULES)}")
    flag = tokens.word("a control flag").lower()
    if flag not in FLAGS:
        raise tokens.fail(f"control flag must be one of {', '.join(FLAGS)}")
    options: dict[str, str] = {}
    while True:
        c = tokens.peek()
        if c == ";":
            tokens.pos += 1
            break
        if not c:
            raise tokens.fail("missing ';' at the end of the login module entry")
        key = tokens.word("an option name")
        if tokens.peek() != "=":
            raise tokens.fail("expected '=' after an option name")
        tokens.pos += 1
        if not tokens.peek():
            raise tokens.fail("missing option value")
        value = tokens.value()
        if key in options:
            raise tokens.fail("repeated option")
        options[key] = value
    if tokens.peek():
        raise tokens.fail("more than one login module entry (sasl.jaas.config takes exactly one)")
    return JaasConfig(module, flag, options)
