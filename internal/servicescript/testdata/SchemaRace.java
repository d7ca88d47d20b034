/**
 * Initializes Pulsar's client Schema interface and one of its AbstractSchema subclasses in two
 * threads at once, and prints "deadlock" when a thread has not finished after waiting up to three
 * seconds for each, "ok" when both have. With the argument "launcher" it first does what
 * OutboxkitStandalone does before the broker starts.
 */
public final class SchemaRace {
    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("launcher")) {
            OutboxkitStandalone.initializeSchemas();
        }
        java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
        String[] classes = {"org.apache.pulsar.client.api.Schema", "org.apache.pulsar.client.impl.schema.BytesSchema"};
        Thread[] threads = new Thread[classes.length];
        for (int i = 0; i < classes.length; i++) {
            String name = classes[i];
            threads[i] = new Thread(() -> {
                try {
                    go.await();
                    Class.forName(name);
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            threads[i].setDaemon(true);
            threads[i].start();
        }
        go.countDown();
        boolean stuck = false;
        for (Thread t : threads) {
            t.join(3000);
            stuck |= t.isAlive();
        }
        System.out.println(stuck ? "deadlock" : "ok");
        System.exit(0);
    }
}
