import java.lang.management.ManagementFactory;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.management.ObjectName;

/**
 * Forces the interleaving in which Pulsar 4.0's client Schema classes deadlock, instead of
 * waiting for two threads to hit it by chance, and prints "deadlock" or "ok".
 *
 * <p>Arguments: MODE LAUNCHER_DIR CLASSPATH. The Pulsar jars (CLASSPATH) and the compiled
 * OutboxkitStandalone (LAUNCHER_DIR) are loaded by a loader of this harness, which holds thread
 * "schema" at the moment it loads Pulsar's client implementation, that is inside
 * {@code Schema}'s static initializer, before that initializer reaches {@code BytesSchema}. With
 * "schema" held there, thread "bytes" initializes {@code BytesSchema}, which needs
 * {@code Schema}: the harness waits until "bytes" waits for that initialization (as the JVM's
 * thread dump reports it), then lets "schema" go on. If the classes still form the
 * cycle, "schema" then waits for {@code BytesSchema} and neither thread ever finishes: the
 * harness prints "deadlock" once the thread dump shows each waiting for a class the other
 * initializes. If not, both finish: "ok".
 *
 * <p>With MODE "launcher" the harness first runs OutboxkitStandalone.main, the broker's main
 * class, up to the point where it loads Pulsar's own standalone starter (the loader refuses that
 * class, so no broker starts): what the launcher does before the broker starts must leave no
 * class initialization for the two threads to wait on, and the race ends "ok". With MODE "plain"
 * it does not, and the race must end "deadlock".
 *
 * <p>Nothing here depends on timing: each step waits for a thread state, not for a duration (the
 * caller bounds the whole run).
 */
public final class SchemaRaceForced {
    static final String SCHEMA = "org.apache.pulsar.client.api.Schema";
    static final String BYTES_SCHEMA = "org.apache.pulsar.client.impl.schema.BytesSchema";
    static final String BINDING = "org.apache.pulsar.client.impl.PulsarClientImplementationBindingImpl";
    static final String STARTER = "org.apache.pulsar.PulsarStandaloneStarter";
    /** The classes "bytes" is initializing while it waits for Schema: BytesSchema and its superclass. */
    static final Set<String> HELD_BY_BYTES = Set.of(BYTES_SCHEMA, "org.apache.pulsar.client.impl.schema.AbstractSchema");

    /** Loads Pulsar and the launcher itself (child first), holding thread "schema" at BINDING. */
    static final class HoldingLoader extends URLClassLoader {
        static {
            registerAsParallelCapable();
        }

        final CountDownLatch held = new CountDownLatch(1);
        final CountDownLatch release = new CountDownLatch(1);

        HoldingLoader(URL[] urls) {
            super(urls, ClassLoader.getPlatformClassLoader());
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (name.equals(STARTER)) {
                throw new ClassNotFoundException(STARTER + " (refused by the harness: no broker starts)");
            }
            if (name.equals(BINDING) && Thread.currentThread().getName().equals("schema")) {
                held.countDown();
                try {
                    release.await();
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            }
            return super.loadClass(name, resolve);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3 || !(args[0].equals("plain") || args[0].equals("launcher"))) {
            throw new IllegalArgumentException("usage: SchemaRaceForced plain|launcher LAUNCHER_DIR CLASSPATH");
        }
        List<URL> urls = new ArrayList<>();
        urls.add(Path.of(args[1]).toUri().toURL());
        for (String entry : args[2].split(":")) {
            if (!entry.isEmpty()) {
                urls.add(Path.of(entry).toUri().toURL());
            }
        }
        HoldingLoader loader = new HoldingLoader(urls.toArray(new URL[0]));

        if (args[0].equals("launcher")) {
            try {
                loader.loadClass("OutboxkitStandalone").getMethod("main", String[].class)
                        .invoke(null, (Object) new String[0]);
                throw new IllegalStateException("OutboxkitStandalone.main returned without loading " + STARTER);
            } catch (java.lang.reflect.InvocationTargetException e) {
                if (!(e.getCause() instanceof NoClassDefFoundError) || !String.valueOf(e.getCause().getMessage()).contains("PulsarStandaloneStarter")) {
                    throw e;
                }
            }
        }

        Thread schema = initializer("schema", SCHEMA, loader);
        Thread bytes = initializer("bytes", BYTES_SCHEMA, loader);
        schema.start();
        // "schema" either reaches the hold (Schema's initializer is running) or finishes (it
        // was initialized before).
        while (loader.held.getCount() > 0 && schema.isAlive()) {
            Thread.sleep(10);
        }
        bytes.start();
        if (loader.held.getCount() == 0) {
            // "bytes" waits for Schema's initialization, held by "schema", or finishes (BytesSchema
            // needs no initialization any more).
            while (bytes.isAlive() && !SCHEMA.equals(awaitedClass("bytes"))) {
                Thread.sleep(10);
            }
        }
        loader.release.countDown();
        while (schema.isAlive() || bytes.isAlive()) {
            // "bytes" waits for Schema, which "schema" initializes; "schema" waits for a class
            // that "bytes" initializes: neither can ever go on.
            String bytesWaits = awaitedClass("bytes");
            String schemaWaits = awaitedClass("schema");
            if (SCHEMA.equals(bytesWaits) && schemaWaits != null && HELD_BY_BYTES.contains(schemaWaits)) {
                System.out.println("deadlock");
                System.exit(0);
            }
            Thread.sleep(10);
        }
        System.out.println("ok");
        System.exit(0);
    }

    static Thread initializer(String name, String className, ClassLoader loader) {
        Thread t = new Thread(() -> {
            try {
                Class.forName(className, true, loader);
            } catch (ClassNotFoundException e) {
                throw new IllegalStateException(e);
            }
        }, name);
        t.setDaemon(true);
        return t;
    }

    /**
     * The class thread name waits for another thread to initialize, from the JVM's own thread
     * dump ("waiting on the Class initialization monitor for ..."), or null when it waits for none.
     * Java reports such a thread as RUNNABLE, so its state cannot tell.
     */
    static String awaitedClass(String name) throws Exception {
        String dump = (String) ManagementFactory.getPlatformMBeanServer().invoke(
                new ObjectName("com.sun.management:type=DiagnosticCommand"), "threadPrint",
                new Object[] {new String[0]}, new String[] {String[].class.getName()});
        int at = dump.indexOf("\n\"" + name + "\" ");
        if (at < 0) {
            return null;
        }
        int end = dump.indexOf("\n\n", at + 1);
        Matcher m = AWAITED.matcher(end < 0 ? dump.substring(at) : dump.substring(at, end));
        return m.find() ? m.group(1) : null;
    }

    static final Pattern AWAITED = Pattern.compile("waiting on the Class initialization monitor for (\\S+)");
}
