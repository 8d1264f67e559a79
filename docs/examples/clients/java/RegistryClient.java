// Start a Kadence workflow, signal it and read its result from Java with a schema registry's own
// serializer and deserializer (Apicurio Registry's, in the Confluent wire format): no Kadence
// format, no schema files. Written for Kadence's docs (docs/schema-registry.md); the test suite
// builds and runs it against a broker and the dev stack's registry
// (tests/integration/test_schema_registry.py).
//
//   java -cp 'build:lib/*' RegistryClient BOOTSTRAP NAMESPACE WORKFLOW_ID REGISTRY_ROOT
//
// REGISTRY_ROOT is the registry's address without its API path (http://host:port); Kadence's
// processors run with KADENCE_SCHEMA_REGISTRY_URL=REGISTRY_ROOT/apis/ccompat/v6, and
// `kadence topics apply` registered the subjects NAMESPACE.commands-value and
// NAMESPACE.replies-value.
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;

import io.apicurio.registry.resolver.SchemaLookupResult;
import io.apicurio.registry.resolver.SchemaResolver;
import io.apicurio.registry.resolver.DefaultSchemaResolver;
import io.apicurio.registry.resolver.strategy.ArtifactReference;
import io.apicurio.registry.serde.SerdeConfig;
import io.apicurio.registry.serde.avro.AvroKafkaDeserializer;
import io.apicurio.registry.serde.avro.AvroKafkaSerializer;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.generic.GenericRecordBuilder;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class RegistryClient {
    private final KafkaProducer<String, Object> producer;
    private final KafkaConsumer<String, Object> replies;
    private final String commandsTopic;
    private final Schema command;

    /** The settings that make Apicurio's serdes speak the Confluent wire format. */
    static Map<String, Object> serdeConfig(String registryRoot) {
        Map<String, Object> s = new HashMap<>();
        s.put(SerdeConfig.REGISTRY_URL, registryRoot + "/apis/registry/v2");
        s.put(SerdeConfig.ENABLE_CONFLUENT_ID_HANDLER, "true"); // the 4-byte ID after the byte 0
        s.put(SerdeConfig.USE_ID, "contentId"); // the IDs of the Confluent-compatible API
        s.put(SerdeConfig.ENABLE_HEADERS, "false"); // the ID in the value, not in a header
        s.put(SerdeConfig.AUTO_REGISTER_ARTIFACT, "false"); // `kadence topics apply` registered them
        s.put(SerdeConfig.FIND_LATEST_ARTIFACT, "true"); // write with the subject's latest schema
        return s;
    }

    RegistryClient(String bootstrap, String namespace, String registryRoot) throws Exception {
        commandsTopic = namespace + ".commands";
        Map<String, Object> serde = serdeConfig(registryRoot);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("enable.idempotence", "true"); // the default partitioner: murmur2 of the key
        p.putAll(serde);
        AvroKafkaSerializer<Object> serializer = new AvroKafkaSerializer<>();
        serializer.configure(serde, false);
        producer = new KafkaProducer<>(p, new StringSerializer(), serializer);
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("isolation.level", "read_committed"); // replies are written in transactions
        c.put("enable.auto.commit", "false");
        AvroKafkaDeserializer<Object> deserializer = new AvroKafkaDeserializer<>();
        deserializer.configure(serde, false);
        replies = new KafkaConsumer<>(c, new StringDeserializer(), deserializer);
        List<TopicPartition> parts = new ArrayList<>();
        for (PartitionInfo info : replies.partitionsFor(namespace + ".replies")) {
            parts.add(new TopicPartition(info.topic(), info.partition()));
        }
        replies.assign(parts);
        replies.seekToEnd(parts);
        for (TopicPartition tp : parts) {
            replies.position(tp); // resolve the end now, before any command is sent
        }
        // the Command schema: the latest version of the commands topic's subject
        SchemaResolver<Schema, Object> resolver = new DefaultSchemaResolver<>();
        resolver.configure(serde, new io.apicurio.registry.serde.avro.AvroSchemaParser<>(null));
        SchemaLookupResult<Schema> latest = resolver.resolveSchemaByArtifactReference(
                ArtifactReference.builder().artifactId(commandsTopic + "-value").build());
        command = latest.getParsedSchema().getParsedSchema();
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
        producer.send(new ProducerRecord<>(commandsTopic, workflowId, cmd)).get();
        long deadline = System.currentTimeMillis() + 60_000;
        while (System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, Object> r : replies.poll(Duration.ofMillis(200))) {
                if (requestId.equals(r.key())) {
                    return (GenericRecord) r.value();
                }
            }
        }
        throw new IllegalStateException("no reply to " + requestId + " within 60 s");
    }

    static ByteBuffer json(String text) {
        return ByteBuffer.wrap(text.getBytes(StandardCharsets.UTF_8));
    }

    public static void main(String[] args) throws Exception {
        RegistryClient k = new RegistryClient(args[0], args[1], args[3]);
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
                .set("input", json("[\"Registry\"]"))
                .set("identity", "java-registry-example")
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
