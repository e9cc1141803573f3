// The Java clients as referees: what kafkajet writes, read by Apache Kafka's own KafkaConsumer, and records
// written by Apache Kafka's own KafkaProducer for kafkajet's readers to read. A single-file program, run as
// `java -cp '<kafka libs>/*' jvm/JavaClients.java <mode> ...` (Java compiles it in memory; no build step).
//
//   consume BOOTSTRAP TOPIC COUNT TIMEOUT_MS [key=value ...]
//       Reads every partition of TOPIC from the beginning (assigned, no group) until COUNT records or
//       TIMEOUT_MS; prints one JSON object a record (bytes as hex, so nothing is lost in the printing).
//   produce BOOTSTRAP [key=value ...]  < commands
//       Runs JSON commands from stdin, one a line: {"op":"send","topic":..,"partition":..,"key":hex|null,
//       "value":hex|null,"timestamp":ms|null,"headers":[[name,hex|null],...]}, {"op":"init"}, {"op":"begin"},
//       {"op":"commit"}, {"op":"abort"}, {"op":"flush"}, {"op":"metrics"}; prints {"sent":N,"failed":M} once
//       stdin ends and every send has its outcome. "metrics" waits for every send so far, then prints the
//       producer's metrics() as {"metrics":[{"group":..,"name":..,"tags":{..},"value":..},...]} (a value that is
//       not a finite number, NaN or a string, prints as null).
//
// Extra key=value arguments are client settings (e.g. isolation.level=read_committed, transactional.id=x).

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class JavaClients {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HexFormat HEX = HexFormat.of();

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: consume BOOTSTRAP TOPIC COUNT TIMEOUT_MS [k=v ...] | produce BOOTSTRAP [k=v ...]");
            System.exit(2);
        }
        switch (args[0]) {
            case "consume" -> consume(args);
            case "produce" -> produce(args);
            default -> {
                System.err.println("unknown mode " + args[0]);
                System.exit(2);
            }
        }
    }

    private static Properties settings(String bootstrap, String[] args, int from) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        for (int i = from; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        return props;
    }

    private static String hex(byte[] bytes) {
        return bytes == null ? null : HEX.formatHex(bytes);
    }

    private static byte[] bytes(JsonNode node) {
        return node == null || node.isNull() ? null : HEX.parseHex(node.asText());
    }

    private static void consume(String[] args) throws Exception {
        String topic = args[2];
        long count = Long.parseLong(args[3]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[4]);
        Properties props = settings(args[1], args, 5);
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.putIfAbsent("auto.offset.reset", "earliest");
        props.putIfAbsent("enable.auto.commit", "false");
        long seen = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> partitions = new ArrayList<>();
            while (partitions.isEmpty() && System.currentTimeMillis() < deadline) {
                List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofMillis(5000));
                if (infos != null) {
                    for (PartitionInfo info : infos) partitions.add(new TopicPartition(topic, info.partition()));
                }
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            while (seen < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    ObjectNode out = JSON.createObjectNode();
                    out.put("partition", r.partition());
                    out.put("offset", r.offset());
                    out.put("timestamp", r.timestamp());
                    out.put("timestamp_type", r.timestampType().name);
                    out.put("key", hex(r.key()));
                    out.put("value", hex(r.value()));
                    ArrayNode headers = out.putArray("headers");
                    for (Header h : r.headers()) {
                        ArrayNode pair = headers.addArray();
                        pair.add(h.key());
                        pair.add(hex(h.value()));
                    }
                    System.out.println(JSON.writeValueAsString(out));
                    seen++;
                }
            }
        }
        System.out.flush();
        System.exit(seen >= count ? 0 : 3);
    }

    private static void produce(String[] args) throws Exception {
        Properties props = settings(args[1], args, 2);
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        List<Future<RecordMetadata>> pending = new ArrayList<>();
        long sent = 0;
        long failed = 0;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
             BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isBlank()) continue;
                JsonNode cmd = JSON.readTree(line);
                switch (cmd.get("op").asText()) {
                    case "init" -> producer.initTransactions();
                    case "begin" -> producer.beginTransaction();
                    case "commit" -> producer.commitTransaction();
                    case "abort" -> producer.abortTransaction();
                    case "flush" -> producer.flush();
                    case "metrics" -> {
                        producer.flush();
                        for (Future<RecordMetadata> f : pending) {
                            try {
                                f.get();
                            } catch (java.util.concurrent.ExecutionException e) {
                                // counted below, once stdin ends
                            }
                        }
                        printMetrics(producer.metrics());
                    }
                    case "send" -> {
                        RecordHeaders headers = new RecordHeaders();
                        JsonNode hs = cmd.get("headers");
                        if (hs != null) {
                            for (JsonNode pair : hs) headers.add(pair.get(0).asText(), bytes(pair.get(1)));
                        }
                        JsonNode p = cmd.get("partition");
                        JsonNode ts = cmd.get("timestamp");
                        pending.add(producer.send(new ProducerRecord<>(cmd.get("topic").asText(),
                                p == null || p.isNull() ? null : p.asInt(),
                                ts == null || ts.isNull() ? null : ts.asLong(),
                                bytes(cmd.get("key")), bytes(cmd.get("value")), headers)));
                        sent++;
                    }
                    default -> throw new IllegalArgumentException("unknown op in " + line);
                }
            }
            producer.flush();
            for (Future<RecordMetadata> f : pending) {
                try {
                    f.get();
                } catch (java.util.concurrent.ExecutionException e) {
                    failed++;  // an aborted transaction's unsent records end this way
                }
            }
        }
        System.out.println("{\"sent\":" + sent + ",\"failed\":" + failed + "}");
    }

    private static void printMetrics(java.util.Map<org.apache.kafka.common.MetricName, ? extends org.apache.kafka.common.Metric> metrics) throws Exception {
        ObjectNode out = JSON.createObjectNode();
        ArrayNode list = out.putArray("metrics");
        for (var e : metrics.entrySet()) {
            ObjectNode m = list.addObject();
            m.put("group", e.getKey().group());
            m.put("name", e.getKey().name());
            ObjectNode tags = m.putObject("tags");
            e.getKey().tags().forEach(tags::put);
            Object v = e.getValue().metricValue();
            if (v instanceof Number n && Double.isFinite(n.doubleValue())) m.put("value", n.doubleValue());
            else m.putNull("value");
        }
        System.out.println(JSON.writeValueAsString(out));
    }
}
