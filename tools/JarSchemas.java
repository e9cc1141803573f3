// Prints the wire layouts Kafka's own client jar knows, for tools/jar_messages.py: every version of each
// named generated message class (org.apache.kafka.common.message.<Name>Data.SCHEMAS[v]) as one JSON line,
// {"message": "ProduceRequest", "version": 13, "fields": [...]}, a field being {"name", "type", "nullable",
// "fields" (a struct or an array of structs), "array", "tag", "default"}; "_tagged_fields" marks a flexible
// version. Run as `java -cp '<kafka libs>/*' tools/JarSchemas.java ProduceRequest EndTxnResponse ...`.

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.protocol.types.BoundField;
import org.apache.kafka.common.protocol.types.Field;
import org.apache.kafka.common.protocol.types.Schema;
import org.apache.kafka.common.protocol.types.TaggedFields;
import org.apache.kafka.common.protocol.types.Type;

public class JarSchemas {
    public static void main(String[] args) throws Exception {
        for (String name : args) {
            Class<?> c = Class.forName("org.apache.kafka.common.message." + name + "Data");
            Schema[] schemas = (Schema[]) c.getField("SCHEMAS").get(null);
            short lowest = c.getField("LOWEST_SUPPORTED_VERSION").getShort(null);
            short highest = c.getField("HIGHEST_SUPPORTED_VERSION").getShort(null);
            for (int v = lowest; v <= highest; v++) {
                if (schemas[v] == null) continue;
                System.out.println("{\"message\":" + quote(name) + ",\"version\":" + v + ",\"fields\":"
                        + fields(schemas[v]) + "}");
            }
        }
    }

    private static String fields(Schema schema) {
        List<String> out = new ArrayList<>();
        for (BoundField f : schema.fields()) out.add(field(f.def, null));
        return "[" + String.join(",", out) + "]";
    }

    private static String field(Field def, Integer tag) {
        StringBuilder b = new StringBuilder("{\"name\":").append(quote(def.name));
        Type type = def.type;
        if (type instanceof TaggedFields tagged) {
            List<String> inner = new ArrayList<>();
            for (Map.Entry<Integer, Field> e : tagged.fields().entrySet()) inner.add(field(e.getValue(), e.getKey()));
            return b.append(",\"type\":\"TAGGED_FIELDS\",\"fields\":[").append(String.join(",", inner)).append("]}").toString();
        }
        if (tag != null) b.append(",\"tag\":").append(tag);
        if (def.hasDefaultValue) b.append(",\"default\":").append(quote(String.valueOf(def.defaultValue)));
        b.append(",\"nullable\":").append(type.isNullable());
        if (type.isArray()) {
            b.append(",\"array\":true");
            type = type.arrayElementType().orElseThrow();
        }
        if (type instanceof Schema struct) {
            b.append(",\"type\":\"STRUCT\",\"fields\":").append(fields(struct));
        } else {
            b.append(",\"type\":").append(quote(type.toString()));
        }
        return b.append("}").toString();
    }

    private static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }
}
