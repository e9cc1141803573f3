"""The settings reference as Markdown: `kafkajet config` prints a client's table, and docs/settings.md
holds the producer's (`python -m kafkajet.config`)."""

from __future__ import annotations

from kafkajet.config.clients import BY_NAME, PRODUCER, REFUSED, ClientTable

# Java's name for each key that is not the Java clients' own (librdkafka's, or kafkajet's): the settings page
# shows it, so a user coming from Java finds the key, and one coming from librdkafka sees which name is whose.
# Every other key is spelled as in Java's ProducerConfig (or the consumer's, for isolation.level).
JAVA_NAMES: dict[str, str] = {
    "default.api.timeout.ms": "same, in the admin client and the consumer (Java's producer has none)",
    "ssl.ca.location": "`ssl.truststore.location` with `ssl.truststore.type=PEM` (this is librdkafka's name)",
    "ssl.certificate.location": "`ssl.keystore.location` with `ssl.keystore.type=PEM` (librdkafka's name)",
    "ssl.key.location": "none: the key is in the `ssl.keystore.location` PEM file (librdkafka's name)",
    "ssl.certificate.pem": "`ssl.keystore.certificate.chain` (librdkafka's name)",
    "ssl.key.pem": "`ssl.keystore.key` (librdkafka's name)",
    "sasl.username": "none: `username=` in `sasl.jaas.config` (librdkafka's name)",
    "sasl.password": "none: `password=` in `sasl.jaas.config` (librdkafka's name)",
    "sasl.oauthbearer.token.provider": "none: `sasl.login.callback.handler.class`, a class (kafkajet's)",
    "sasl.oauthbearer.method": "none: the login callback handler decides (librdkafka's name)",
    "sasl.oauthbearer.client.id": "`sasl.oauthbearer.client.credentials.client.id` (librdkafka's name)",
    "sasl.oauthbearer.client.secret": "`sasl.oauthbearer.client.credentials.client.secret` (librdkafka's name)",
    "sasl.oauthbearer.extensions": "none: `extension_NAME=` options in `sasl.jaas.config` (librdkafka's name)",
    "sasl.oauthbearer.grant.type": "none: `sasl.oauthbearer.jwt.retriever.class` decides (librdkafka's name)",
    "sasl.oauthbearer.assertion.jwt.template.file": "`sasl.oauthbearer.assertion.template.file` (librdkafka's name)",
    "sasl.oauthbearer.assertion.private.key.pem": "none: Java reads the key from "
                                                  "`sasl.oauthbearer.assertion.private.key.file` (kafkajet's)",
    "https.ca.location": "none (librdkafka's name)",
    "https.ca.pem": "none (librdkafka's name)",
    "sasl.aws.region": "none (kafkajet's)",
    "sasl.aws.profile": "none: `awsProfileName=` of aws-msk-iam-auth's `sasl.jaas.config` (kafkajet's)",
    "sasl.aws.role.arn": "none: `awsRoleArn=` of aws-msk-iam-auth's `sasl.jaas.config` (kafkajet's)",
    "sasl.aws.role.session.name": "none: `awsRoleSessionName=` of aws-msk-iam-auth's `sasl.jaas.config` "
                                  "(kafkajet's)",
    "sasl.kerberos.principal": "none: `principal=` of a Krb5LoginModule `sasl.jaas.config` (librdkafka's name)",
    "sasl.kerberos.keytab": "none: `keyTab=` of a Krb5LoginModule `sasl.jaas.config` (librdkafka's name)",
    "batch.max.size": "none (kafkajet's)",
    "partitioner": "`partitioner.class`, a class (a callable or a name here)",
    "interceptors": "`interceptor.classes`, classes (objects here)",
    "allow.auto.create.topics": "none in the producer, which always lets the broker create (the consumer's name)",
    "opentelemetry.enable": "none (kafkajet's)",
}
if set(JAVA_NAMES) - set(BY_NAME):
    raise AssertionError(f"JAVA_NAMES names keys that are not in a table: {sorted(set(JAVA_NAMES) - set(BY_NAME))}")


def config_markdown(table: ClientTable = PRODUCER) -> str:
    """The table as Markdown: `kafkajet config` prints it, and docs/settings.md holds the producer's."""
    lines = ["| key | type | default | Java's name | description |", "| --- | --- | --- | --- | --- |"]
    for k in table.keys:
        default = f"{table.client_id_prefix}-N" if k.name == "client.id" else ("required" if k.required else k.default)
        if k.name == "acks":
            default = "all"
        if isinstance(default, list):
            default = ",".join(default)
        doc = f"{k.doc}. **Accepted, not read by this client**: {k.not_read}" if k.not_read else k.doc
        java = JAVA_NAMES.get(k.name, "same")
        lines.append(f"| `{k.name}` | {k.type} | `{default}` | {java} | {doc} |")
    return "\n".join(lines)


SETTINGS_PAGE_HEAD = """\
# Producer settings

<!-- Generated from kafkajet/config/clients.py by `python -m kafkajet.config > docs/settings.md`; do not edit by hand:
tests/unit/test_settings_page.py fails when this page and the table differ. -->

Every setting `Producer` and `AIOProducer` take, from the table in `kafkajet/config/clients.py` that also validates
them. Keys are the Java producer's where it has the setting; as keyword arguments they are written in
snake_case (`linger_ms=5` is `linger.ms`). A value may be given as a string (a properties file, a Spark
option) and is converted. An unknown key, a wrong type or a value out of range raises `ConfigError` naming
the key. "Java's name" is what the Java client calls a setting whose key here is librdkafka's or kafkajet's
own ("same" where the key is Java's). `kafkajet config` prints this table, and `kafkajet config --client admin` (or `fetch`) the admin
and fetch clients' (the same shared keys; [Admin and reading back](admin.md)).

"""


REFUSED_HEAD = """
## Java's keys kafkajet refuses

Every other key of the Java 4.4 producer is in the table above (a JVM-only value of one, such as a class
name in `interceptor.classes` or a JKS store, is refused with what to use instead). These are refused
whatever their value, with this reason:

"""


def refused_markdown() -> str:
    lines = ["| key | why, and what to use instead |", "| --- | --- |"]
    lines += [f"| `{name}` | {why} |" for name, why in sorted(REFUSED.items())]
    return "\n".join(lines)


def settings_page() -> str:
    """docs/settings.md: the producer's settings reference, and the Java keys it refuses."""
    return SETTINGS_PAGE_HEAD + config_markdown(PRODUCER) + "\n" + REFUSED_HEAD + refused_markdown() + "\n"
