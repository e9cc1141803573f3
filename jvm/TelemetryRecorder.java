import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.apache.kafka.shaded.io.opentelemetry.proto.common.v1.KeyValue;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.Metric;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.MetricsData;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.NumberDataPoint;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ResourceMetrics;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ScopeMetrics;

/**
 * A broker's client telemetry exporter for the tests (KIP-714): with this class in metric.reporters the broker
 * offers GetTelemetrySubscriptions and PushTelemetry, and every push it receives is decoded with the
 * OpenTelemetry classes kafka-clients shades and appended to the file named by kafkajet.telemetry.file:
 *
 *   push TAB client-instance-id TAB terminating TAB content-type TAB number-of-metrics TAB client-id
 *   metric TAB client-instance-id TAB name TAB sum|gauge TAB value TAB key=value,... (sorted attributes)
 *
 * A payload that does not parse is written as "invalid TAB client-instance-id TAB message".
 * Compiled and put on the brokers' class path by tests/helpers/telemetry.py.
 */
public class TelemetryRecorder implements MetricsReporter, ClientTelemetryExporterProvider {
    public static final String FILE_CONFIG = "kafkajet.telemetry.file";
    private volatile Path file;

    @Override
    public void configure(Map<String, ?> configs) {
        Object name = configs.get(FILE_CONFIG);
        if (name == null) {
            throw new IllegalArgumentException("TelemetryRecorder needs " + FILE_CONFIG);
        }
        file = Path.of(name.toString());
    }

    @Override
    public void init(List<KafkaMetric> metrics) {
    }

    @Override
    public void metricChange(KafkaMetric metric) {
    }

    @Override
    public void metricRemoval(KafkaMetric metric) {
    }

    @Override
    public void close() {
    }

    @Override
    public ClientTelemetryExporter clientTelemetryExporter() {
        return (context, payload) -> record(payload, context.authorizableRequestContext().clientId());
    }

    private synchronized void record(ClientTelemetryPayload payload, String clientId) {
        String id = payload.clientInstanceId().toString();
        StringBuilder out = new StringBuilder();
        try {
            MetricsData data = MetricsData.parseFrom(payload.data().duplicate());
            int count = 0;
            StringBuilder metrics = new StringBuilder();
            for (ResourceMetrics rm : data.getResourceMetricsList()) {
                for (ScopeMetrics sm : rm.getScopeMetricsList()) {
                    for (Metric m : sm.getMetricsList()) {
                        boolean sum = m.hasSum();
                        List<NumberDataPoint> points = sum ? m.getSum().getDataPointsList()
                                : m.getGauge().getDataPointsList();
                        for (NumberDataPoint p : points) {
                            count++;
                            Map<String, String> attrs = new TreeMap<>();
                            for (KeyValue kv : p.getAttributesList()) {
                                attrs.put(kv.getKey(), kv.getValue().getStringValue());
                            }
                            StringBuilder a = new StringBuilder();
                            attrs.forEach((k, v) -> a.append(a.length() == 0 ? "" : ",").append(k).append('=').append(v));
                            double value = p.hasAsInt() ? p.getAsInt() : p.getAsDouble();
                            metrics.append("metric\t").append(id).append('\t').append(m.getName()).append('\t')
                                .append(sum ? "sum" : "gauge").append('\t').append(value).append('\t').append(a)
                                .append('\n');
                        }
                    }
                }
            }
            out.append("push\t").append(id).append('\t').append(payload.isTerminating()).append('\t')
                .append(payload.contentType()).append('\t').append(count).append('\t').append(clientId).append('\n')
                .append(metrics);
        } catch (Exception e) {
            out.append("invalid\t").append(id).append('\t').append(String.valueOf(e).replace('\n', ' ')).append('\n');
        }
        try {
            Files.writeString(file, out, StandardCharsets.UTF_8, StandardOpenOption.CREATE,
                StandardOpenOption.APPEND);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
