package dev.rebalancer.examples.streams;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * A stateful Kafka Streams application: counts the records of each key of INPUT_TOPIC in a
 * persistent (RocksDB) store named "counts", whose changelog topic is
 * "APPLICATION_ID-counts-changelog", and writes each new count to OUTPUT_TOPIC.
 *
 * <p>Configured from the environment (Config below). Prints one JSON object a line on stdout:
 * "started" (its settings), "state" (each KafkaStreams state change, with the tasks it holds
 * when RUNNING), "restore-start" and "restored" (per store partition: records and seconds),
 * "uncaught" (a stream thread's exception) and "closed". SIGTERM closes it within 30 s; with a
 * group.instance.id it does not leave its group, so it can come back within its session
 * without a rebalance.
 */
public final class CountApp {
    static final String STORE = "counts";

    private CountApp() {}

    public static void main(String[] args) throws Exception {
        Config config;
        try {
            config = Config.fromEnvironment(System.getenv());
        } catch (IllegalArgumentException error) {
            System.err.println("streams-app: " + error.getMessage());
            System.exit(2);
            return;
        }
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(config.inputTopic, Consumed.with(Serdes.String(), Serdes.String()))
                .groupByKey()
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as(STORE)
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.Long()))
                .toStream()
                .to(config.outputTopic, Produced.with(Serdes.String(), Serdes.Long()));
        KafkaStreams streams = new KafkaStreams(builder.build(), config.properties());
        Events.emit("started", config.describe());

        // close() returns once the state is NOT_RUNNING, before the listener has told it: the
        // shutdown hook waits for the listener so that the last state change is printed too.
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            Map<String, Object> fields = new java.util.LinkedHashMap<>();
            fields.put("from", before.name());
            fields.put("to", now.name());
            if (now == KafkaStreams.State.RUNNING) {
                TreeSet<String> active = new TreeSet<>();
                TreeSet<String> standby = new TreeSet<>();
                for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                    for (TaskMetadata task : thread.activeTasks()) {
                        active.add(task.taskId().toString());
                    }
                    for (TaskMetadata task : thread.standbyTasks()) {
                        standby.add(task.taskId().toString());
                    }
                }
                fields.put("active", new ArrayList<>(active));
                fields.put("standby", new ArrayList<>(standby));
            }
            Events.emit("state", fields);
            config.markReady(now == KafkaStreams.State.RUNNING);
            if (now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        streams.setGlobalStateRestoreListener(new RestoreLog());
        streams.setUncaughtExceptionHandler(error -> {
            Events.emit("uncaught", Map.of("error", String.valueOf(error)));
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                    .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });

        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            boolean clean = streams.close(Duration.ofSeconds(30));
            try {
                stopped.await(5, TimeUnit.SECONDS);
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
            }
            config.markReady(false);
            Events.emit("closed", Map.of("clean", clean));
            closed.countDown();
        }, "streams-app-shutdown"));
        if (config.joinGate != null) {
            // The JVM, the topology and the state directory are ready; only the join waits for
            // the operator's join gate to open this pod (docs/join-gate.md, gateHolds: Join).
            long waited = awaitFile(config.joinGate);
            Events.emit("gate-open", Map.of("waitedMs", waited));
        }
        streams.start();
        closed.await();
    }

    /** Milliseconds until `file` exists. */
    static long awaitFile(Path file) throws InterruptedException {
        long start = System.nanoTime();
        while (!Files.exists(file)) {
            Thread.sleep(50);
        }
        return (System.nanoTime() - start) / 1_000_000;
    }

    /** One line per store partition restored: how many records, and how long it took. */
    static final class RestoreLog implements StateRestoreListener {
        private final Map<TopicPartition, Long> started = new ConcurrentHashMap<>();

        @Override
        public void onRestoreStart(TopicPartition partition, String store, long start, long end) {
            started.put(partition, System.nanoTime());
            Events.emit("restore-start", restoreFields(partition, store, Map.of(
                    "startOffset", start, "endOffset", end)));
        }

        @Override
        public void onBatchRestored(TopicPartition partition, String store, long end, long count) {}

        @Override
        public void onRestoreEnd(TopicPartition partition, String store, long total) {
            Events.emit("restored", restoreFields(partition, store, Map.of(
                    "records", total, "seconds", seconds(partition))));
        }

        @Override
        public void onRestoreSuspended(TopicPartition partition, String store, long total) {
            Events.emit("restore-suspended", restoreFields(partition, store, Map.of(
                    "records", total, "seconds", seconds(partition))));
        }

        private double seconds(TopicPartition partition) {
            Long start = started.remove(partition);
            return start == null ? 0.0 : Math.round((System.nanoTime() - start) / 1e6) / 1e3;
        }

        private static Map<String, Object> restoreFields(
                TopicPartition partition, String store, Map<String, Object> more) {
            Map<String, Object> fields = new java.util.LinkedHashMap<>();
            fields.put("store", store);
            fields.put("topic", partition.topic());
            fields.put("partition", partition.partition());
            fields.putAll(new java.util.TreeMap<>(more));
            return fields;
        }
    }

    /** The application's settings, each from an environment variable. */
    static final class Config {
        final String bootstrap;
        final String applicationId;
        final String inputTopic;
        final String outputTopic;
        final String groupProtocol;
        final String instanceId;
        final int standbyReplicas;
        final int threads;
        final String stateDir;
        final Integer sessionTimeoutMs;
        final Integer commitIntervalMs;
        final Path readyFile;
        final Path joinGate;

        private Config(Map<String, String> env) {
            bootstrap = required(env, "BOOTSTRAP_SERVERS");
            applicationId = required(env, "APPLICATION_ID");
            inputTopic = required(env, "INPUT_TOPIC");
            outputTopic = env.getOrDefault("OUTPUT_TOPIC", applicationId + "-counts");
            groupProtocol = env.getOrDefault("GROUP_PROTOCOL", "classic").trim().toLowerCase();
            if (!List.of("classic", "streams").contains(groupProtocol)) {
                throw new IllegalArgumentException("GROUP_PROTOCOL=" + groupProtocol
                        + " is not a group protocol of Kafka Streams; fix: set classic or streams");
            }
            String instance = env.getOrDefault("GROUP_INSTANCE_ID", "").trim();
            instanceId = instance.isEmpty() ? null : instance;
            standbyReplicas = number(env, "NUM_STANDBY_REPLICAS", 0, 0);
            threads = number(env, "NUM_STREAM_THREADS", 1, 1);
            stateDir = env.getOrDefault("STATE_DIR", "/tmp/kafka-streams");
            sessionTimeoutMs = env.containsKey("SESSION_TIMEOUT_MS")
                    ? number(env, "SESSION_TIMEOUT_MS", 45000, 1) : null;
            commitIntervalMs = env.containsKey("COMMIT_INTERVAL_MS")
                    ? number(env, "COMMIT_INTERVAL_MS", 30000, 1) : null;
            String ready = env.getOrDefault("READY_FILE", "").trim();
            readyFile = ready.isEmpty() ? null : Path.of(ready);
            String gate = env.getOrDefault("REBALANCER_JOIN_GATE", "").trim();
            joinGate = gate.isEmpty() ? null : Path.of(gate);
        }

        static Config fromEnvironment(Map<String, String> env) {
            return new Config(env);
        }

        Properties properties() {
            Properties props = new Properties();
            props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
            props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, groupProtocol);
            props.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, standbyReplicas);
            props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, threads);
            props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
            if (instanceId != null) {
                props.put(StreamsConfig.consumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG),
                        instanceId);
            }
            if (sessionTimeoutMs != null) {
                props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG),
                        sessionTimeoutMs);
            }
            if (commitIntervalMs != null) {
                props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, commitIntervalMs);
            }
            return props;
        }

        Map<String, Object> describe() {
            Map<String, Object> fields = new java.util.LinkedHashMap<>();
            fields.put("applicationId", applicationId);
            fields.put("inputTopic", inputTopic);
            fields.put("outputTopic", outputTopic);
            fields.put("groupProtocol", groupProtocol);
            fields.put("groupInstanceId", instanceId);
            fields.put("numStandbyReplicas", standbyReplicas);
            fields.put("numStreamThreads", threads);
            fields.put("stateDir", stateDir);
            fields.put("sessionTimeoutMs", sessionTimeoutMs);
            fields.put("commitIntervalMs", commitIntervalMs);
            fields.put("version", System.getenv().getOrDefault("APP_VERSION", ""));
            return fields;
        }

        void markReady(boolean ready) {
            if (readyFile == null) {
                return;
            }
            try {
                if (ready) {
                    Files.createDirectories(readyFile.toAbsolutePath().getParent());
                    Files.writeString(readyFile, "RUNNING\n");
                } else {
                    Files.deleteIfExists(readyFile);
                }
            } catch (IOException error) {
                Events.emit("ready-file-failed", Map.of("error", String.valueOf(error)));
            }
        }

        private static String required(Map<String, String> env, String name) {
            String value = env.getOrDefault(name, "").trim();
            if (value.isEmpty()) {
                throw new IllegalArgumentException(name + " is not set; fix: set it in the "
                        + "container's environment");
            }
            return value;
        }

        private static int number(Map<String, String> env, String name, int fallback, int min) {
            String value = env.getOrDefault(name, "").trim();
            if (value.isEmpty()) {
                return fallback;
            }
            try {
                int parsed = Integer.parseInt(value);
                if (parsed >= min) {
                    return parsed;
                }
            } catch (NumberFormatException ignored) {
                // reported below
            }
            throw new IllegalArgumentException(name + "=" + value + " is not a whole number of at "
                    + "least " + min + "; fix: set one, or unset it for " + fallback);
        }
    }

    /** One JSON object a line on stdout: {"event": ..., "at": epoch seconds, ...fields}. */
    static final class Events {
        private Events() {}

        static synchronized void emit(String event, Map<String, Object> fields) {
            StringBuilder line = new StringBuilder("{\"event\":").append(quote(event));
            long now = System.currentTimeMillis();
            line.append(",\"at\":").append(now / 1000).append('.');
            line.append(String.format(Locale.ROOT, "%03d", now % 1000));
            for (Map.Entry<String, Object> entry : fields.entrySet()) {
                line.append(',').append(quote(entry.getKey())).append(':');
                line.append(value(entry.getValue()));
            }
            System.out.println(line.append('}'));
            System.out.flush();
        }

        private static String value(Object value) {
            if (value == null) {
                return "null";
            }
            if (value instanceof Number || value instanceof Boolean) {
                return value.toString();
            }
            if (value instanceof List<?> items) {
                List<String> parts = new ArrayList<>();
                for (Object item : items) {
                    parts.add(value(item));
                }
                return "[" + String.join(",", parts) + "]";
            }
            return quote(value.toString());
        }

        private static String quote(String text) {
            StringBuilder out = new StringBuilder("\"");
            for (char c : text.toCharArray()) {
                switch (c) {
                    case '"' -> out.append("\\\"");
                    case '\\' -> out.append("\\\\");
                    case '\n' -> out.append("\\n");
                    case '\r' -> out.append("\\r");
                    case '\t' -> out.append("\\t");
                    default -> {
                        if (c < 0x20) {
                            out.append(String.format("\\u%04x", (int) c));
                        } else {
                            out.append(c);
                        }
                    }
                }
            }
            return out.append('"').toString();
        }
    }
}
