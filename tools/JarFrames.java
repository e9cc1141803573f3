// Encodes and decodes message bodies with Kafka's own client jar, for tests/unit/test_protocol_jar_frames.py:
// reads JSON lines {"message": "ProduceResponse", "version": 12, "json": {...}} (the body as Kafka's generated
// <Name>DataJsonConverter reads it) and prints {"hex": "<the body as the jar writes it>"} for each; a line
// with "hex" instead of "json" is read by the jar and printed back as {"json": {...}}.
// Run as `java -cp '<kafka libs>/*' tools/JarFrames.java < lines`.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.util.HexFormat;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.protocol.Readable;

public class JarFrames {
    public static void main(String[] args) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            JsonNode row = mapper.readTree(line);
            String name = "org.apache.kafka.common.message." + row.get("message").asText();
            short version = (short) row.get("version").asInt();
            Class<?> data = Class.forName(name + "Data");
            Class<?> converter = Class.forName(name + "DataJsonConverter");
            ObjectNode out = mapper.createObjectNode();
            if (row.has("json")) {
                Message m = (Message) converter.getMethod("read", JsonNode.class, short.class)
                        .invoke(null, row.get("json"), version);
                ByteBuffer buf = MessageUtil.toByteBufferAccessor(m, version).buffer();
                byte[] bytes = new byte[buf.remaining()];
                buf.get(bytes);
                out.put("hex", HexFormat.of().formatHex(bytes));
            } else {
                ByteBuffer buf = ByteBuffer.wrap(HexFormat.of().parseHex(row.get("hex").asText()));
                Object m = data.getConstructor(Readable.class, short.class).newInstance(new ByteBufferAccessor(buf), version);
                out.set("json", (JsonNode) converter.getMethod("write", data, short.class).invoke(null, m, version));
            }
            System.out.println(mapper.writeValueAsString(out));
        }
    }
}
