"""PySpark Python Data Source for Kafka: `spark.dataSource.register(KafkaDataSource)`, format("kafkajet")."""

from kafkajet.spark.source import KafkaDataSource

__all__ = ["KafkaDataSource"]
