"""kafkajet for asyncio programs: `from kafkajet.aio import AIOProducer`."""

from kafkajet.producer.aio_producer import AIOProducer

__all__ = ["AIOProducer"]
