"""The types that cross module and process boundaries are defined once and importable from the package face."""

from __future__ import annotations

import pickle

from kafkajet.transaction import TXN_COORDINATOR, PreparedTransaction


def test_a_prepared_transaction_survives_a_pickle_round_trip_as_spark_commit_messages_take_it() -> None:
    prepared = PreparedTransaction("sink-0-3", producer_id=4242, producer_epoch=7)
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(prepared, protocol=protocol))
        assert back == prepared and type(back) is PreparedTransaction


def test_a_pickle_from_before_the_move_still_loads() -> None:
    # A commit message pickled when the class lived in kafkajet.producer.transactions names that module.
    new = pickle.dumps(PreparedTransaction("t", 1, 2), protocol=2)
    assert b"ckafkajet.transaction\nPreparedTransaction\n" in new
    old = new.replace(b"ckafkajet.transaction\n", b"ckafkajet.producer.transactions\n")
    assert pickle.loads(old) == PreparedTransaction("t", 1, 2)


def test_the_package_exports_it_and_the_clients_use_the_same_types() -> None:
    import kafkajet.admin
    import kafkajet.producer.producer
    import kafkajet.producer.transactions
    import kafkajet.testing.mock.state

    assert kafkajet.PreparedTransaction is PreparedTransaction and "PreparedTransaction" in kafkajet.__all__
    assert kafkajet.producer.producer.PreparedTransaction is PreparedTransaction
    assert kafkajet.admin.PreparedTransaction is PreparedTransaction
    for module in (kafkajet.admin, kafkajet.producer.transactions, kafkajet.testing.mock.state):
        assert module.TXN_COORDINATOR is TXN_COORDINATOR, module.__name__


def test_config_validates_sasl_mechanism_against_its_mechanism_table() -> None:
    from kafkajet import config

    assert config.SASL_MECHANISMS == tuple(config.SASL)
    for mechanism in config.SASL_MECHANISMS:
        assert config.BY_NAME["sasl.mechanism"].validator is not None
        assert config.BY_NAME["sasl.mechanism"].validator("sasl.mechanism", mechanism.lower()) == mechanism
