// A Kafka Streams application for the lab: reads a topic, upper-cases each value and writes it
// to another. Stateless on purpose: it needs kafka-streams and kafka-clients only (no RocksDB),
// and is run from this source file by the JDK's source launcher, so no build step is needed.
// Arguments: bootstrap servers, application id (the group id), input topic, output topic,
// state directory, group protocol (streams or classic). Each state change is printed as
// "STATE <old> -> <new>"; SIGTERM closes it cleanly (it leaves its group).

import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;

public class UppercaseApp {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, args[5]);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(args[2]).mapValues(value -> value.toUpperCase()).to(args[3]);
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch closed = new CountDownLatch(1);
        streams.setStateListener((now, before) -> System.out.println("STATE " + before + " -> " + now));
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            closed.countDown();
        }));
        streams.start();
        closed.await();
    }
}
