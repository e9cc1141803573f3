"""The broker side of GSSAPI for the mock cluster, as the JDK's GssKrb5Server that Kafka runs: accept the
client's context tokens with the service keytab's keys, then offer "no security layer" (RFC 4752 3.1, the
only one Kafka allows) in a wrapped 4-byte message and check the client's wrapped choice.

The principal recorded is Kafka's short name by its DEFAULT principal.to.local rule: the first component of
the client's principal (alice@REALM and alice/host@REALM are both "alice"). The ticket's expiry does not cap
the session: Kafka caps it only by connections.max.reauth.ms for GSSAPI.
"""

from __future__ import annotations

import os
from typing import Any

from kafkajet.testing.mock.sasl_rejections import SaslRejected, malformed

NO_SECURITY_LAYER = 1
MAX_BUFFER = 0xFFFFFF  # the largest a 3-byte field holds; no layer means no buffer, so any value does


def acceptor_credentials(keytab: str) -> Any:
    """gssapi acceptor credentials for every service principal in `keytab`."""
    import gssapi

    return gssapi.Credentials(gssapi.raw.acquire_cred_from({b"keytab": os.fsencode(keytab)}, usage="accept").creds)


class GssapiServer:
    mechanism = "GSSAPI"

    def __init__(self, keytab: str | None) -> None:
        self._keytab = keytab
        self._context: Any = None
        self._state = "initial"  # -> context -> layer-sent -> complete | failed
        self._client = ""
        self.principal: str | None = None

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def evaluate(self, client_message: bytes) -> bytes:
        import gssapi

        state = self._state
        self._state = "failed"
        try:
            if state == "initial":
                if self._keytab is None:
                    raise SaslRejected("Authentication failed: no GSSAPI service keytab is configured on this "
                                       "cluster")
                self._context = gssapi.SecurityContext(creds=acceptor_credentials(self._keytab), usage="accept")
                state = "context"
            if state == "context" and self._context.complete:
                # The client's word after our last context token (empty, as the JDK's client sends).
                if client_message:
                    raise malformed("GSSAPI", "message after the context was established: expected none")
                return self._offer_layer()
            if state == "context":
                reply = self._context.step(client_message)
                self._state = "context"
                if self._context.complete and not reply:  # no mutual authentication: nothing to send back
                    return self._offer_layer()
                return bytes(reply or b"")
            if state == "layer-sent":
                self._check_choice(client_message)
                self._state = "complete"
                return b""
        except gssapi.exceptions.GSSError as e:
            raise SaslRejected(f"Authentication failed: GSSAPI: {' '.join(str(e).split())}") from None
        raise SaslRejected(f"GSSAPI: unexpected client message in state {state}", "ILLEGAL_SASL_STATE")

    def _offer_layer(self) -> bytes:
        # The client said its last context word (an empty message once mutual authentication is done).
        self._client = str(self._context.initiator_name)
        self._state = "layer-sent"
        offer = bytes([NO_SECURITY_LAYER]) + MAX_BUFFER.to_bytes(3, "big")
        return bytes(self._context.wrap(offer, False).message)

    def _check_choice(self, message: bytes) -> None:
        choice = self._context.unwrap(message).message
        if len(choice) < 4:
            raise malformed("GSSAPI", "security layer choice: fewer than 4 bytes")
        if choice[0] != NO_SECURITY_LAYER:
            raise malformed("GSSAPI", f"security layer choice: mask {choice[0]} (only 1, none, is offered)")
        # An authorization id (kafka-python sends its service@host) is ignored: Kafka's callback handler
        # authorizes every authenticated client as itself.
        self.principal = self._client.split("@")[0].split("/")[0]
