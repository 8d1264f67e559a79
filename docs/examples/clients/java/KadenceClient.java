// Start a Kadence workflow, signal it and read its result from Java, with the plain Kafka client
// and Apache Avro: no Kadence library. Written for Kadence's docs (docs/kafka-clients.md); the
// test suite builds and runs it against a broker (tests/integration/test_kafka_clients.py).
//
//   java -cp 'build:lib/*' KadenceClient BOOTSTRAP NAMESPACE WORKFLOW_ID SCHEMAS_DIR
//
// What a client must do:
//   * key each command by the workflow ID and let Kafka's default partitioner (murmur2) place it;
//   * write Kadence's wire format: the byte 'K', the schema-set version (SCHEMAS_DIR/VERSION),
//     then the Avro binary of the Command (SCHEMAS_DIR/Command.avsc);
//   * give each command a request ID: the engine answers on NAMESPACE.replies with a record
//     keyed by it (Reply.avsc), and a retried command with the same ID applies once.
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.UUID;

import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.generic.GenericRecordBuilder;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class KadenceClient {
    private final Schema command;
    private final Schema reply;
    private final int version;
    private final KafkaProducer<String, byte[]> producer;
    private final KafkaConsumer<String, byte[]> replies;
    private final String commandsTopic;

    KadenceClient(String bootstrap, String namespace, File schemas) throws Exception {
        command = new Schema.Parser().parse(new File(schemas, "Command.avsc"));
        reply = new Schema.Parser().parse(new File(schemas, "Reply.avsc"));
        version = Integer.parseInt(Files.readString(new File(schemas, "VERSION").toPath()).trim());
        commandsTopic = namespace + ".commands";
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("enable.idempotence", "true"); // the default partitioner: murmur2 of the key
        producer = new KafkaProducer<>(p, new StringSerializer(), new ByteArraySerializer());
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("isolation.level", "read_committed"); // replies are written in transactions
        c.put("enable.auto.commit", "false");
        replies = new KafkaConsumer<>(c, new StringDeserializer(), new ByteArrayDeserializer());
        // every partition of the replies topic, from its end: a reply is found by its key
        List<TopicPartition> parts = new ArrayList<>();
        for (PartitionInfo info : replies.partitionsFor(namespace + ".replies")) {
            parts.add(new TopicPartition(info.topic(), info.partition()));
        }
        replies.assign(parts);
        replies.seekToEnd(parts);
        for (TopicPartition tp : parts) {
            replies.position(tp); // resolve the end now, before any command is sent
        }
    }

    private Schema branch(String name) {
        for (Schema s : command.getField("body").schema().getTypes()) {
            if (s.getName().equals(name)) {
                return s;
            }
        }
        throw new IllegalArgumentException("no command body " + name);
    }

    /** Sends a command and returns the reply to it. */
    GenericRecord send(String workflowId, GenericRecord body) throws Exception {
        String requestId = UUID.randomUUID().toString();
        GenericRecord cmd = new GenericRecordBuilder(command)
                .set("event_id", UUID.randomUUID().toString())
                .set("aggregate_key", workflowId)
                .set("timestamp_ms", System.currentTimeMillis())
                .set("trace_id", null)
                .set("request_id", requestId)
                .set("idempotency_key", requestId)
                .set("expected_version", null)
                .set("run_id", null)
                .set("body", body)
                .set("span_id", null)
                .build();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.write('K');
        out.write(version);
        BinaryEncoder enc = EncoderFactory.get().binaryEncoder(out, null);
        new GenericDatumWriter<GenericRecord>(command).write(cmd, enc);
        enc.flush();
        producer.send(new ProducerRecord<>(commandsTopic, workflowId, out.toByteArray())).get();
        long deadline = System.currentTimeMillis() + 60_000;
        GenericDatumReader<GenericRecord> reader = new GenericDatumReader<>(reply);
        while (System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, byte[]> r : replies.poll(Duration.ofMillis(200))) {
                if (requestId.equals(r.key())) {
                    byte[] v = r.value(); // 'K', the version that wrote it, the Avro body
                    return reader.read(null, DecoderFactory.get().binaryDecoder(v, 2, v.length - 2, null));
                }
            }
        }
        throw new IllegalStateException("no reply to " + requestId + " within 60 s");
    }

    static ByteBuffer json(String text) {
        return ByteBuffer.wrap(text.getBytes(StandardCharsets.UTF_8));
    }

    public static void main(String[] args) throws Exception {
        KadenceClient k = new KadenceClient(args[0], args[1], new File(args[3]));
        String workflowId = args[2];
        GenericRecord start = new GenericRecordBuilder(k.branch("StartWorkflow"))
                .set("workflow_type", "Greeter")
                .set("task_queue", "greetings")
                .set("input", json("[\"Hello\"]")) // the workflow's arguments, a JSON array
                .build();
        GenericRecord started = k.send(workflowId, start);
        System.out.println("start: " + started.get("status") + " run " + started.get("run_id"));
        GenericRecord signal = new GenericRecordBuilder(k.branch("SignalWorkflow"))
                .set("signal_name", "name")
                .set("input", json("[\"Java\"]"))
                .set("identity", "java-example")
                .build();
        System.out.println("signal: " + k.send(workflowId, signal).get("status"));
        GenericRecord await = new GenericRecordBuilder(k.branch("AwaitWorkflowResult")).set("wait", true).build();
        GenericRecord done = k.send(workflowId, await);
        ByteBuffer result = (ByteBuffer) done.get("result");
        System.out.println("result: " + StandardCharsets.UTF_8.decode(result));
        k.producer.close();
        k.replies.close();
    }
}
