// Apache Kafka's own KafkaProducer as a client of benchmarks/compare.py: what a Java user would pick instead of
// kafkajet, on the same broker and workload. A single-file program, run as
// `java -cp '<kafka libs>/*' jvm/ProducerBench.java <mode> ...` (benchmarks/_jvm.py builds the command line).
//
//   send BOOTSTRAP TOPIC RECORDS SIZE [key=value ...]
//       A fire-and-forget loop, as kafkajet's send-100B row: producer.send(record) with no callback, RECORDS
//       times, then flush(); the records acknowledged are the producer's own metrics, record-send-total
//       (failures count in record-error-total instead), as kafkajet's runner counts them.
//   latency BOOTSTRAP TOPIC RATE SECONDS SIZE [key=value ...]
//       RATE records/s for SECONDS (Kafka's ThroughputThrottler, the one its perf tool uses, as the Python
//       runners use kafkajet's copy of it), a callback per record taking System.nanoTime() at the ack; p50/p99
//       send-to-ack of the records acknowledged.
//
// Extra key=value arguments are producer settings; compare.py passes acks, linger.ms and (where the row names
// it) batch.size. The clock starts at the first timed send, after the producer is created, has fetched the
// topic's metadata (partitionsFor) and has had one record acknowledged (the connection is up), and stops when
// flush() returns: JVM start, the in-memory compile of this file and class loading are outside it, as the Python
// runners' interpreter start and imports are. Prints one JSON line: acked, wall (s), cpu (process CPU seconds
// from main() on, i.e. without the JVM's start and the compile), rss_mb (peak, VmHWM), p50_ms/p99_ms.

import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.server.util.ThroughputThrottler;

public class ProducerBench {
    public static void main(String[] args) throws Exception {
        long cpuAtMain = cpuNanos();
        if (args.length < 5) {
            System.err.println("usage: send BOOTSTRAP TOPIC RECORDS SIZE [k=v ...] | latency BOOTSTRAP TOPIC RATE SECONDS SIZE [k=v ...]");
            System.exit(2);
        }
        boolean latency = args[0].equals("latency");
        String bootstrap = args[1], topic = args[2];
        int settingsFrom = latency ? 6 : 5;
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        for (int i = settingsFrom; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            props.put(kv[0], kv[1]);
        }
        String out;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            producer.partitionsFor(topic);
            producer.send(new ProducerRecord<>(topic, new byte[1])).get();  // connected, outside the clock
            double before = metric(producer, "record-send-total");
            if (latency) {
                out = latency(producer, topic, Integer.parseInt(args[3]), Double.parseDouble(args[4]),
                              Integer.parseInt(args[5]));
            } else {
                int records = Integer.parseInt(args[3]);
                byte[] value = new byte[Integer.parseInt(args[4])];
                Arrays.fill(value, (byte) 'x');
                long t0 = System.nanoTime();
                for (int i = 0; i < records; i++) {
                    producer.send(new ProducerRecord<>(topic, value));
                }
                producer.flush();
                double wall = (System.nanoTime() - t0) / 1e9;
                long acked = (long) (metric(producer, "record-send-total") - before);
                out = String.format(Locale.ROOT, "\"acked\": %d, \"wall\": %.6f, \"errors\": %d", acked, wall,
                                    (long) metric(producer, "record-error-total"));
            }
        }
        double cpu = (cpuNanos() - cpuAtMain) / 1e9;
        System.out.println(String.format(Locale.ROOT, "{%s, \"cpu\": %.3f, \"rss_mb\": %.1f}", out, cpu, peakRssMb()));
    }

    private static String latency(KafkaProducer<byte[], byte[]> producer, String topic, int rate, double seconds,
                                  int size) {
        int n = (int) (rate * seconds);
        byte[] value = new byte[size];
        Arrays.fill(value, (byte) 'x');
        long[] lat = new long[n];
        AtomicInteger acked = new AtomicInteger();
        long t0 = System.nanoTime();
        ThroughputThrottler throttler = new ThroughputThrottler(rate, System.currentTimeMillis());
        for (int i = 0; i < n; i++) {
            long start = System.nanoTime();
            producer.send(new ProducerRecord<>(topic, value), (md, exc) -> {
                long now = System.nanoTime();
                if (exc == null) {
                    lat[acked.getAndIncrement()] = (now - start) / 1000;  // callbacks run on the one sender thread
                }
            });
            if (throttler.shouldThrottle(i + 1, System.currentTimeMillis())) {
                throttler.throttle();
            }
        }
        producer.flush();
        double wall = (System.nanoTime() - t0) / 1e9;
        int got = acked.get();
        long[] done = Arrays.copyOf(lat, got);
        Arrays.sort(done);
        double p50 = got == 0 ? 0 : done[got / 2] / 1000.0, p99 = got == 0 ? 0 : done[(int) (got * 0.99)] / 1000.0;
        return String.format(Locale.ROOT, "\"acked\": %d, \"wall\": %.6f, \"p50_ms\": %.3f, \"p99_ms\": %.3f", got,
                             wall, p50, p99);
    }

    private static double metric(KafkaProducer<byte[], byte[]> producer, String name) {
        for (var e : producer.metrics().entrySet()) {
            MetricName m = e.getKey();
            if (m.name().equals(name) && m.group().equals("producer-metrics")) {
                Object v = ((Metric) e.getValue()).metricValue();
                return v instanceof Number num ? num.doubleValue() : 0;
            }
        }
        throw new IllegalStateException("no producer metric " + name);
    }

    private static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime();
    }

    private static double peakRssMb() throws Exception {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("VmHWM:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", "")) / 1024.0;
            }
        }
        return 0;
    }
}
