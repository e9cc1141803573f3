// Prints, for every constant of Kafka's org.apache.kafka.common.protocol.Errors, its code, name, exception class
// and that class's superclasses up to ApiException, tab-separated, with the version of the kafka-clients jar on
// the class path: what tools/gen_errors.py reads to place each broker error where the Java client places it.
// Run by `python tools/gen_errors.py --dump-java JAR_DIR`.
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.protocol.Errors;

public class JavaErrorHierarchy {
    public static void main(String[] args) {
        // The jar the classes came from names the version (kafka-clients-4.4.0.jar).
        String jar = Errors.class.getProtectionDomain().getCodeSource().getLocation().getPath();
        System.out.println("# from " + jar.substring(jar.lastIndexOf('/') + 1));
        System.out.println("code\tname\tjava_class\tjava_superclasses\tmessage");
        for (Errors e : Errors.values()) {
            if (e == Errors.NONE) continue;
            Class<?> c = e.exception().getClass();
            StringBuilder supers = new StringBuilder();
            for (Class<?> s = c.getSuperclass(); s != null && s != ApiException.class; s = s.getSuperclass()) {
                if (supers.length() > 0) supers.append(' ');
                supers.append(s.getSimpleName());
            }
            String message = e.message() == null ? "" : e.message().replaceAll("\\s+", " ");
            System.out.println(e.code() + "\t" + e.name() + "\t" + c.getSimpleName() + "\t" + supers + "\t" + message);
        }
    }
}
