"""Security: SASL client mechanisms (kafkajet.security.sasl, .scram, .jaas) and TLS (kafkajet.security.tls)."""
