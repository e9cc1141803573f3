"""Security: what a connection needs (connection.py: the TLS context and a SASL client factory from the
configuration), TLS contexts (tls.py), and SASL: the client interface (mechanism.py), the mechanisms of
config.SASL (sasl.py: PLAIN and OAUTHBEARER, and making any mechanism's client and client-wide login; scram.py;
aws_msk.py; kerberos.py for GSSAPI), OIDC token fetching (oidc.py), tokens and logins refreshed before expiry
(token_refresh.py) and Java's sasl.jaas.config syntax (jaas.py)."""
