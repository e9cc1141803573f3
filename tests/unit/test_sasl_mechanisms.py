"""The sans-I/O SASL client mechanisms (kafkajet.security) against RFC vectors and the mock cluster's server
mechanisms (kafkajet.testing.mock.sasl), JAAS parsing, and fuzzing of every SCRAM parser."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkajet.config import SASL, SASL_MECHANISMS
from kafkajet.errors import AuthenticationError, ConfigError
from kafkajet.security.jaas import (
    KRB5_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    parse_jaas_config,
)
from kafkajet.security.sasl import (
    OAuthBearerClient,
    PlainClient,
    SaslClient,
    sasl_client_from_config,
)
from kafkajet.security.scram import ScramClient, ScramProtocolError, escape_saslname, unescape_saslname
from kafkajet.testing.mock.sasl import (
    Credentials,
    PlainServer,
    SaslRejected,
    ScramServer,
    scram_credential,
)
from tests.helpers.requires import require

SECRET = "s3cr3t-pa55word-XYZZY"
TOKEN = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run_exchange(client: SaslClient, server: Any) -> None:
    """Drive client and server to the end, as the network client and the broker would."""
    message: bytes | None = client.start()
    while message is not None:
        challenge = server.evaluate(message)
        message = client.step(challenge)
    assert client.complete and server.complete


# --- known vectors ----------------------------------------------------------------------------------------

RFC7677 = {  # RFC 7677 section 3: user "user", password "pencil"
    "mechanism": "SCRAM-SHA-256", "client_nonce": "rOprNGfwEbeRWgbNEkqO",
    "server_nonce": "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", "salt": "W22ZaJ0SNY7soEsUEjb6gQ==",
    "client_first": b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    "server_first": b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    "client_final": b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    "server_final": b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
}
RFC5802 = {  # RFC 5802 section 5 (SCRAM-SHA-1; not a Kafka mechanism, but the same algorithm)
    "mechanism": "SCRAM-SHA-1", "client_nonce": "fyko+d2lbbFgONRv9qkxdawL",
    "server_nonce": "3rfcNHYJY1ZVvWVs7j", "salt": "QSXCR+Q6sek8bf92",
    "client_first": b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
    "server_first": b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
    "client_final": b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
    "server_final": b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
}


@pytest.mark.parametrize("v", [RFC7677, RFC5802], ids=["rfc7677-sha256", "rfc5802-sha1"])
def test_scram_client_reproduces_the_rfc_exchange(v: dict[str, Any]) -> None:
    client = ScramClient("user", "pencil", v["mechanism"], nonce=v["client_nonce"])
    assert client.start() == v["client_first"]
    assert client.step(v["server_first"]) == v["client_final"]
    assert not client.complete
    assert client.step(v["server_final"]) is None
    assert client.complete


@pytest.mark.parametrize("v", [RFC7677, RFC5802], ids=["rfc7677-sha256", "rfc5802-sha1"])
def test_scram_server_reproduces_the_rfc_exchange(v: dict[str, Any]) -> None:
    creds = Credentials()
    creds.set_scram_credential(v["mechanism"], "user",
                               scram_credential(v["mechanism"], "pencil", salt=base64.b64decode(v["salt"])))
    server = ScramServer(v["mechanism"], creds, nonce=v["server_nonce"])
    assert server.evaluate(v["client_first"]) == v["server_first"]
    assert server.evaluate(v["client_final"]) == v["server_final"]
    assert server.complete and server.principal == "user"


def test_saslname_escaping_round_trips() -> None:
    assert escape_saslname("a=b,c") == "a=3Db=2Cc"
    assert unescape_saslname("a=3Db=2Cc") == "a=b,c"
    assert escape_saslname("=2C") == "=3D2C"  # "=" escaped first, so a literal "=2C" survives
    assert unescape_saslname(escape_saslname("=2C")) == "=2C"
    with pytest.raises(ScramProtocolError):
        unescape_saslname("a=ZZb")


# --- client against the mock cluster's server mechanisms ---------------------------------------------------


@pytest.fixture(scope="module")
def creds() -> Credentials:
    return Credentials({"alice": SECRET, "we,ird=name": "other-secret"})


@pytest.mark.parametrize("mechanism", SCRAM)
def test_scram_right_password_authenticates(creds: Credentials, mechanism: str) -> None:
    server = ScramServer(mechanism, creds)
    run_exchange(ScramClient("alice", SECRET, mechanism), server)
    assert server.principal == "alice"


def test_scram_username_with_escaped_characters(creds: Credentials) -> None:
    server = ScramServer("SCRAM-SHA-512", creds)
    run_exchange(ScramClient("we,ird=name", "other-secret", "SCRAM-SHA-512"), server)
    assert server.principal == "we,ird=name"


def test_plain_right_password_authenticates(creds: Credentials) -> None:
    client = PlainClient("alice", SECRET)
    assert client.start() == b"\0alice\0" + SECRET.encode()
    server = PlainServer(creds)
    assert client.step(server.evaluate(b"\0alice\0" + SECRET.encode())) is None
    assert client.complete and server.principal == "alice"


@pytest.mark.parametrize("mechanism", SCRAM)
def test_scram_wrong_password_is_refused_by_the_server(creds: Credentials, mechanism: str) -> None:
    client, server = ScramClient("alice", "wrong", mechanism), ScramServer(mechanism, creds)
    server_first = server.evaluate(client.start())
    with pytest.raises(SaslRejected) as e:
        server.evaluate(client.step(server_first) or b"")
    assert e.value.error == "SASL_AUTHENTICATION_FAILED" and "invalid credentials" in e.value.message
    assert not server.complete and server.principal is None


def test_plain_wrong_password_and_unknown_user_are_refused(creds: Credentials) -> None:
    for message in (b"\0alice\0wrong", b"\0bob\0" + SECRET.encode()):
        with pytest.raises(SaslRejected) as e:
            PlainServer(creds).evaluate(message)
        assert e.value.error == "SASL_AUTHENTICATION_FAILED"
    with pytest.raises(SaslRejected):  # an authorization id other than the username
        PlainServer(creds).evaluate(b"bob\0alice\0" + SECRET.encode())
    assert PlainServer(creds).evaluate(b"alice\0alice\0" + SECRET.encode()) == b""


@pytest.mark.parametrize("mechanism", SCRAM)
def test_scram_unknown_user_is_refused_at_the_first_message(creds: Credentials, mechanism: str) -> None:
    with pytest.raises(SaslRejected) as e:
        ScramServer(mechanism, creds).evaluate(ScramClient("mallory", SECRET, mechanism).start())
    assert e.value.error == "SASL_AUTHENTICATION_FAILED"


@pytest.mark.parametrize("mechanism", SCRAM)
def test_scram_client_rejects_a_tampered_server_signature(creds: Credentials, mechanism: str) -> None:
    client = ScramClient("alice", SECRET, mechanism)
    server = ScramServer(mechanism, creds)
    client_final = client.step(server.evaluate(client.start()))
    assert client_final is not None
    server_final = server.evaluate(client_final)
    signature = bytearray(base64.b64decode(server_final[2:]))
    signature[0] ^= 1
    with pytest.raises(AuthenticationError, match="signature does not match") as e:
        client.step(b"v=" + base64.b64encode(bytes(signature)))
    assert not client.complete
    assert SECRET not in str(e.value)


def test_scram_client_rejects_a_nonce_not_extending_its_own() -> None:
    client = ScramClient("alice", SECRET, nonce="clientnonce")
    client.start()
    with pytest.raises(ScramProtocolError, match="protocol violation"):
        client.step(b"r=othernonce123,s=c2FsdA==,i=4096")
    client = ScramClient("alice", SECRET, nonce="clientnonce")
    client.start()
    with pytest.raises(ScramProtocolError):  # the server added nothing of its own
        client.step(b"r=clientnonce,s=c2FsdA==,i=4096")


@pytest.mark.parametrize("iterations", [1, 4095, 16385, 10**9])
def test_scram_client_rejects_iteration_counts_out_of_kafka_bounds(iterations: int) -> None:
    client = ScramClient("alice", SECRET, nonce="cn")
    client.start()
    with pytest.raises(AuthenticationError, match="iterations"):
        client.step(f"r=cnsn,s=c2FsdA==,i={iterations}".encode())


@pytest.mark.parametrize("server_first", [
    b"m=ext,r=cnsn,s=c2FsdA==,i=4096",          # a mandatory extension we cannot honour
    b"r=cnsn,s=c2FsdA==",                        # missing i=
    b"s=c2FsdA==,r=cnsn,i=4096",                 # out of order
    b"r=cnsn,s=c2FsdA==,i=4096,r=cnsn2",         # repeated attribute
    b"r=cnsn,s=not*base64,i=4096",
    b"r=cnsn,s=,i=4096",
    b"r=cnsn,s=c2FsdA==,i=04096",
    b"r=cnsn,s=c2FsdA==,i=-4096",
    b"r=cnsn,s=c2FsdA==,i=\xd9\xa4\xd9\xa0\xd9\xa9\xd9\xa6",  # Arabic-Indic digits: isdigit() but not ASCII
    b"\xff\xfe",
    b"",
])
def test_scram_client_rejects_malformed_server_first(server_first: bytes) -> None:
    client = ScramClient("alice", SECRET, nonce="cn")
    client.start()
    with pytest.raises(AuthenticationError):
        client.step(server_first)


def test_scram_server_final_error_carries_the_servers_reason() -> None:
    client = ScramClient("alice", SECRET, nonce="cn")
    client.start()
    client.step(b"r=cnsn,s=c2FsdA==,i=4096")
    with pytest.raises(AuthenticationError, match="invalid-proof") as e:
        client.step(b"e=invalid-proof")
    assert "SCRAM-SHA-256" in str(e.value) and not isinstance(e.value, ScramProtocolError)


def test_scram_client_is_spent_after_a_failure() -> None:
    client = ScramClient("alice", SECRET, nonce="cn")
    client.start()
    with pytest.raises(AuthenticationError):
        client.step(b"garbage")
    with pytest.raises(AuthenticationError):
        client.step(b"r=cnsn,s=c2FsdA==,i=4096")


# --- configuration and secrets ----------------------------------------------------------------------------


def test_jaas_config_parses_plain_and_scram_modules_with_escapes() -> None:
    jaas = parse_jaas_config(f'{PLAIN_LOGIN_MODULE} required username="alice" password="p\\"a\\\\ss\\n";')
    assert jaas.module == PLAIN_LOGIN_MODULE and jaas.flag == "required"
    assert jaas.options == {"username": "alice", "password": 'p"a\\ss\n'}
    jaas = parse_jaas_config(f"  {SCRAM_LOGIN_MODULE}  REQUIRED\n  username=bob // comment\n"
                             f'  password="x y;z" /* another */ ;  ')
    assert jaas.options == {"username": "bob", "password": "x y;z"} and jaas.flag == "required"
    assert SECRET not in repr(parse_jaas_config(f'{PLAIN_LOGIN_MODULE} required password="{SECRET}";'))
    # java.io.StreamTokenizer's octal escapes: at most three digits, the third only after a leading 0-3.
    jaas = parse_jaas_config(f'{PLAIN_LOGIN_MODULE} required a="\\101\\1x" b="\\477" c="\\q";')
    assert jaas.options == {"a": "A\x01x", "b": "'7", "c": "q"}


@pytest.mark.parametrize("text", [
    f'com.example.MyLoginModule required username="alice" password="{SECRET}";',
    f'{PLAIN_LOGIN_MODULE} required username="alice" password="{SECRET}"',           # no ";"
    f'{PLAIN_LOGIN_MODULE} required username="alice" password="{SECRET};',           # no closing quote
    f'{PLAIN_LOGIN_MODULE} required username="alice" password={SECRET} extra;',     # option without "="
    f'{PLAIN_LOGIN_MODULE} mandatory username="alice" password="{SECRET}";',         # bad control flag
    f'{PLAIN_LOGIN_MODULE} required password="{SECRET}" password="{SECRET}";',      # repeated option
    f'{PLAIN_LOGIN_MODULE} required password="{SECRET}"; {PLAIN_LOGIN_MODULE} required;',  # two entries
    f'{PLAIN_LOGIN_MODULE} required password="{SECRET}\n";',                         # line end in quotes
    f'{PLAIN_LOGIN_MODULE} required password=;{SECRET}',
    f'{PLAIN_LOGIN_MODULE} required password="{SECRET}" /* unterminated;',
    "",
])
def test_jaas_config_rejects_malformed_text_without_quoting_it(text: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_jaas_config(text)
    assert SECRET not in str(e.value) and SECRET[:6] not in str(e.value)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_config_from_explicit_keys_or_jaas(creds: Credentials, mechanism: str) -> None:
    module = PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
    configs = [
        {"sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": SECRET},
        {"sasl.mechanism": mechanism, "sasl.jaas.config": f'{module} required username="alice" password="{SECRET}";'},
        {"sasl.mechanism": mechanism.lower(), "sasl.username": "alice", "sasl.password": SECRET,
         "sasl.jaas.config": f'{module} required username="alice" password="{SECRET}";'},  # agreeing copies
    ]
    for cfg in configs:
        client = sasl_client_from_config(cfg, "broker-1")
        assert client.mechanism == mechanism
        assert SECRET not in repr(client)
        server = PlainServer(creds) if mechanism == "PLAIN" else ScramServer(mechanism, creds)
        run_exchange(client, server)


@pytest.mark.parametrize("cfg, words", [
    ({"sasl.mechanism": "DIGEST-MD5", "sasl.password": SECRET}, ["DIGEST-MD5", "PLAIN"]),
    ({"sasl.mechanism": "PLAIN", "sasl.password": SECRET}, ["sasl.username"]),
    ({"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice"}, ["sasl.password"]),
    ({"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "other",
      "sasl.jaas.config": f'{PLAIN_LOGIN_MODULE} required username="alice" password="{SECRET}";'}, ["disagree"]),
    ({"sasl.mechanism": "SCRAM-SHA-256",
      "sasl.jaas.config": f'{PLAIN_LOGIN_MODULE} required username="alice" password="{SECRET}";'}, ["ScramLoginModule"]),
    ({"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": SECRET + "\0"}, ["NUL"]),
    ({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": SECRET + "\udc80"}, ["password"]),
    ({"sasl.mechanism": "OAUTHBEARER"}, ["sasl.oauthbearer.token.provider"]),
    ({"sasl.mechanism": "GSSAPI", "sasl.jaas.config": f'{KRB5_LOGIN_MODULE} required useKeyTab=true keyTab="k";'},
     ["needs sasl.kerberos.principal"]),
    ({"sasl.mechanism": "GSSAPI", "sasl.kerberos.principal": "alice@EXAMPLE.COM",
      "sasl.kerberos.keytab": "/nonexistent/alice.keytab"}, ["cannot read the keytab file /nonexistent/alice.keytab"]),
    # Neither a keytab nor a ticket cache: Java's module would prompt for a password.
    ({"sasl.mechanism": "GSSAPI", "sasl.jaas.config": f"{KRB5_LOGIN_MODULE} required useKeyTab=false;"},
     ["useTicketCache=true", "cannot prompt"]),
    ({"sasl.mechanism": "GSSAPI", "sasl.jaas.config": f"{KRB5_LOGIN_MODULE} required useTicketCache=true renewTGT=true;"},
     ["renewTGT=true is not supported", "kinit -R"]),
    ({"sasl.mechanism": "GSSAPI", "sasl.kerberos.principal": "bob@EXAMPLE.COM",
      "sasl.jaas.config": f'{KRB5_LOGIN_MODULE} required useKeyTab=true keyTab="k" principal="alice@EXAMPLE.COM";'},
     ["sasl.kerberos.principal", "disagree"]),
    ({"sasl.mechanism": "GSSAPI", "sasl.jaas.config": f'{PLAIN_LOGIN_MODULE} required username="a" password="{SECRET}";'},
     ["Krb5LoginModule"]),
    ({"sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token.provider": TOKEN}, ["callable"]),
])
def test_config_errors_name_the_problem_and_never_the_secret(cfg: dict[str, Any], words: list[str]) -> None:
    with pytest.raises(ConfigError) as e:
        sasl_client_from_config(cfg, "broker-1")
    for word in words:
        assert word in str(e.value)
    assert SECRET not in str(e.value) and TOKEN not in str(e.value)
    assert e.value.__cause__ is None or SECRET not in str(e.value.__cause__)


@pytest.mark.parametrize("cfg", [
    {},  # Java's default mechanism, GSSAPI, and no keytab: the ticket cache, as librdkafka without one
    {"sasl.mechanism": "GSSAPI", "sasl.kerberos.principal": "alice@EXAMPLE.COM"},
    {"sasl.mechanism": "GSSAPI", "sasl.jaas.config": f"{KRB5_LOGIN_MODULE} required useTicketCache=true;"},
])
def test_without_a_keytab_an_empty_ticket_cache_is_named_with_what_to_do(
        cfg: dict[str, Any], tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    require("gssapi")
    from kafkajet.security.token_refresh import TokenFetchError

    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path}/no-such-cache")
    with pytest.raises(TokenFetchError, match="no usable Kerberos ticket .*/no-such-cache: .*run kinit") as e:
        sasl_client_from_config(cfg, "broker-1")
    assert not e.value.retryable


def test_supported_mechanisms_constant() -> None:
    assert SASL_MECHANISMS == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM", "GSSAPI")


def test_each_mechanism_entry_names_functions_that_exist() -> None:
    import importlib

    for mechanism in SASL.values():
        for ref in filter(None, (mechanism.client, mechanism.login)):
            module, _, name = ref.partition(":")
            assert callable(getattr(importlib.import_module(module), name)), (mechanism.name, ref)


def test_the_mock_serves_every_mechanism_of_the_table() -> None:
    from kafkajet.testing.mock.sasl import SERVER_MECHANISMS

    assert SERVER_MECHANISMS == SASL_MECHANISMS


# --- OAUTHBEARER ------------------------------------------------------------------------------------------


class Provider:
    def __init__(self, token: str = TOKEN, extensions: dict[str, str] | None = None) -> None:
        self._token, self._extensions = token, extensions

    def token(self) -> str:
        return self._token

    def extensions(self) -> dict[str, str] | None:
        return self._extensions


def test_oauthbearer_initial_response_from_a_callable_or_a_provider_object() -> None:
    client = sasl_client_from_config({"sasl.mechanism": "OAUTHBEARER",
                                      "sasl.oauthbearer.token.provider": lambda: TOKEN}, "b")
    assert client.start() == f"n,,\x01auth=Bearer {TOKEN}\x01\x01".encode()
    assert client.step(b"") is None and client.complete
    client = OAuthBearerClient(Provider(extensions={"traceId": "123", "logicalCluster": "lkc-1"}))
    assert client.start() == f"n,,\x01auth=Bearer {TOKEN}\x01traceId=123\x01logicalCluster=lkc-1\x01\x01".encode()
    assert TOKEN not in repr(client)


def test_oauthbearer_server_error_sends_the_dummy_message_then_fails() -> None:
    client = OAuthBearerClient(lambda: TOKEN)
    client.start()
    error = b'{"status":"invalid_token","scope":"kafka","openid-configuration":"https://idp/.well-known"}'
    assert client.step(error) == b"\x01"
    assert not client.complete and client.server_error is not None and "invalid_token" in client.server_error
    with pytest.raises(AuthenticationError, match="invalid_token") as e:
        client.step(b"")  # a broker that (wrongly) accepts after its own error
    assert TOKEN not in str(e.value)


@pytest.mark.parametrize("provider", [
    lambda: "",
    lambda: "has space",
    lambda: 42,
    lambda: (_ for _ in ()).throw(RuntimeError(f"cannot refresh {TOKEN}")),
    Provider(extensions={"auth": "x"}),
    Provider(extensions={"bad key": "x"}),
    Provider(extensions={"k": "\x01"}),
])
def test_oauthbearer_bad_tokens_and_provider_failures(provider: Any) -> None:
    client = OAuthBearerClient(provider)
    with pytest.raises(AuthenticationError) as e:
        client.start()
    assert TOKEN not in str(e.value) and e.value.__cause__ is None


# --- fuzzing ----------------------------------------------------------------------------------------------

# Text made of SCRAM-looking pieces reaches deeper into the parsers than uniform random bytes.
_piece = st.sampled_from(["r=", "s=", "i=", "v=", "e=", "m=", "c=", "p=", "n=", "a=", ",", "=", "cn", "sn",
                          "c2FsdA==", "4096", "biws", "n,,", "y,,", "p=tls,", "=2C", "=3D", "\x00", "\xff",
                          "alice", "AAAA"])
scram_like = st.lists(_piece, max_size=12).map(lambda parts: "".join(parts).encode("utf-8", "surrogatepass"))
fuzz_bytes = st.one_of(st.binary(max_size=200), scram_like)


@FUZZ
@given(data=fuzz_bytes)
def test_fuzz_client_server_first_parser(data: bytes) -> None:
    client = ScramClient("alice", SECRET, nonce="cn")
    client.start()
    try:
        reply = client.step(data)
    except AuthenticationError as e:
        assert SECRET not in str(e)
    else:
        assert reply is not None and reply.startswith(b"c=biws,r=cn")


@FUZZ
@given(data=fuzz_bytes)
def test_fuzz_client_server_final_parser(data: bytes) -> None:
    client = ScramClient("alice", SECRET, nonce="cn")
    client.start()
    client.step(b"r=cnsn,s=c2FsdA==,i=4096")
    with pytest.raises(AuthenticationError):  # without the key, no input can be the right signature
        client.step(data)


@FUZZ
@given(data=fuzz_bytes)
def test_fuzz_server_client_first_parser(creds: Credentials, data: bytes) -> None:
    for mechanism in SCRAM:
        try:
            reply = ScramServer(mechanism, creds).evaluate(data)
        except SaslRejected as e:
            assert e.error == "SASL_AUTHENTICATION_FAILED"
        else:
            assert reply.startswith(b"r=")


@FUZZ
@given(data=fuzz_bytes)
def test_fuzz_server_client_final_parser(creds: Credentials, data: bytes) -> None:
    server = ScramServer("SCRAM-SHA-256", creds)
    server.evaluate(ScramClient("alice", SECRET, nonce="cn").start())
    with pytest.raises(SaslRejected):
        server.evaluate(data)
    assert not server.complete


@FUZZ
@given(data=fuzz_bytes)
def test_fuzz_plain_server(creds: Credentials, data: bytes) -> None:
    try:
        PlainServer(creds).evaluate(data)
    except SaslRejected:
        pass
    else:
        assert data.split(b"\0")[1:] == [b"alice", SECRET.encode()]


def _mutate(message: bytes, data: st.DataObject) -> bytes:
    """One edit of a valid message: flip, delete or insert a byte, or cut it short."""
    i = data.draw(st.integers(0, max(len(message) - 1, 0)))
    edit = data.draw(st.sampled_from(["flip", "delete", "insert", "truncate"]))
    if edit == "flip":
        return message[:i] + bytes([message[i] ^ data.draw(st.integers(1, 255))]) + message[i + 1:]
    if edit == "delete":
        return message[:i] + message[i + 1:]
    if edit == "insert":
        return message[:i] + bytes([data.draw(st.integers(0, 255))]) + message[i:]
    return message[:i]


@FUZZ
@given(data=st.data())
def test_fuzz_mutated_exchange_is_refused_cleanly(creds: Credentials, data: st.DataObject) -> None:
    """A one-byte edit anywhere in a valid exchange: each side either rejects it cleanly or (when the edit
    leaves the message meaning the same, e.g. inside an ignored extension) carries on; never another error."""
    mechanism = data.draw(st.sampled_from(SCRAM))
    client, server = ScramClient("alice", SECRET, mechanism), ScramServer(mechanism, creds)
    target = data.draw(st.sampled_from(["client-first", "server-first", "client-final", "server-final"]))
    try:
        message = client.start()
        if target == "client-first":
            message = _mutate(message, data)
        challenge = server.evaluate(message)
        if target == "server-first":
            challenge = _mutate(challenge, data)
        final = client.step(challenge)
        assert final is not None
        if target == "client-final":
            final = _mutate(final, data)
        verifier = server.evaluate(final)
        if target == "server-final":
            verifier = _mutate(verifier, data)
        client.step(verifier)
    except SaslRejected as e:  # the server refused (an edit may be caught by either side)
        assert SECRET not in e.message and not server.complete
    except AuthenticationError as e:  # the client refused
        assert SECRET not in str(e) and not client.complete
    else:
        # Only edits that change no meaning get here, e.g. the unused low bits of a base64 character.
        assert client.complete and server.complete


def test_reprs_hold_no_secrets() -> None:
    creds = Credentials({"alice": SECRET})
    cred = creds.scram("SCRAM-SHA-256", "alice")
    texts = [repr(creds), repr(cred), repr(ScramClient("alice", SECRET)), repr(PlainClient("alice", SECRET))]
    assert all(SECRET not in t for t in texts)
    assert cred is not None and base64.b64encode(cred.stored_key).decode() not in repr(cred)


@pytest.mark.parametrize("make", [
    lambda: PlainClient("alice", "secret"),
    lambda: ScramClient("alice", "secret", "SCRAM-SHA-512"),
    lambda: OAuthBearerClient(lambda: "token-123"),
], ids=["PLAIN", "SCRAM", "OAUTHBEARER"])
def test_a_client_runs_one_exchange_only(make: Callable[[], Any]) -> None:
    client = make()
    assert not client.complete
    client.start()
    with pytest.raises(AuthenticationError, match=f"{client.mechanism}: start\\(\\) called twice"):
        client.start()


def test_gssapi_without_the_gssapi_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Any) -> None:
    import sys

    keytab = tmp_path / "client.keytab"
    keytab.write_bytes(b"\x05\x02")
    monkeypatch.setitem(sys.modules, "gssapi", None)  # import gssapi now raises ImportError
    with pytest.raises(ConfigError, match=r"needs the gssapi package: pip install 'kafkajet\[gssapi\]'"):
        sasl_client_from_config({"sasl.mechanism": "GSSAPI", "sasl.kerberos.principal": "alice@EXAMPLE.COM",
                                 "sasl.kerberos.keytab": str(keytab)}, "broker-1")
