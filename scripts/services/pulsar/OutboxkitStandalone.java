/**
 * Starts Pulsar standalone for scripts/services/pulsar.sh, with one change: the client's Schema
 * classes are initialized in this thread before the broker starts any of its own.
 *
 * <p>In Pulsar 4.0 the interface {@code Schema} initializes subclasses of {@code AbstractSchema}
 * in its static initializer, and initializing such a subclass initializes {@code Schema} (an
 * interface with default methods). When two broker threads start those two initializations at
 * once, as when a broker loads its first topics after a start ({@code PersistentTopic} and
 * {@code TopicPoliciesSystemTopicClient}), each waits for the other for ever and every topic load
 * times out. Done here first, in one thread, the cycle completes.
 */
public final class OutboxkitStandalone {
    private OutboxkitStandalone() {}

    /** Initializes the client's Schema classes, and with them the AbstractSchema subclasses. */
    public static void initializeSchemas() throws ClassNotFoundException {
        Class.forName("org.apache.pulsar.client.api.Schema");
    }

    public static void main(String[] args) throws Exception {
        initializeSchemas();
        org.apache.pulsar.PulsarStandaloneStarter.main(args);
    }
}
