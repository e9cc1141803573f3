// Prints the keys a Java client's ConfigDef defines, one per line as name<TAB>type<TAB>default, sorted, for
// tests/unit/data/java-producer-keys-4.4.0.tsv: the list the key table is checked against
// (tests/unit/test_java_producer_keys.py). Run as
// `java -cp '<kafka libs>/*' tools/JavaConfigKeys.java producer > tests/unit/data/java-producer-keys-4.4.0.tsv`.

import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.utils.internals.AppInfoParser;

public class JavaConfigKeys {
    public static void main(String[] args) {
        if (args.length != 1 || !args[0].equals("producer")) {
            throw new IllegalArgumentException("usage: JavaConfigKeys producer");
        }
        System.out.println("# kafka-clients " + AppInfoParser.getVersion() + " ProducerConfig.configDef()");
        Map<String, ConfigDef.ConfigKey> keys = new TreeMap<>(ProducerConfig.configDef().configKeys());
        for (ConfigDef.ConfigKey k : keys.values()) {
            Object d = k.defaultValue;
            String shown = d == ConfigDef.NO_DEFAULT_VALUE ? "(required)"
                    : d == null ? "null" : d instanceof Class ? ((Class<?>) d).getName()
                    : ConfigDef.convertToString(d, k.type);
            System.out.println(k.name + "\t" + k.type.name().toLowerCase() + "\t" + shown.replace("\t", " "));
        }
    }
}
