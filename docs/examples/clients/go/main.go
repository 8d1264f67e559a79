// Start a Kadence workflow, signal it and read its result from Go, with franz-go and hamba/avro:
// no Kadence library. Written for Kadence's docs (docs/kafka-clients.md); the test suite builds
// and runs it against a broker (tests/integration/test_kafka_clients.py).
//
//	go run . BOOTSTRAP NAMESPACE WORKFLOW_ID SCHEMAS_DIR
//
// What a client must do: key each command by the workflow ID with Kafka's murmur2 partitioner
// (franz-go's default for keyed records is Kafka-compatible); write the byte 'K', the schema-set
// version (SCHEMAS_DIR/VERSION) and the Avro binary of the Command (SCHEMAS_DIR/Command.avsc);
// give each command a request ID and read the reply keyed by it on NAMESPACE.replies (Reply.avsc).
package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
)

type client struct {
	command, reply avro.Schema
	version        byte
	producer       *kgo.Client
	replies        *kgo.Client
	commands       string
}

func newID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func mustSchema(dir, name string) avro.Schema {
	text, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		panic(err)
	}
	s, err := avro.Parse(string(text))
	if err != nil {
		panic(err)
	}
	return s
}

func newClient(bootstrap, namespace, dir string) *client {
	v, err := os.ReadFile(filepath.Join(dir, "VERSION"))
	if err != nil {
		panic(err)
	}
	version, err := strconv.Atoi(strings.TrimSpace(string(v)))
	if err != nil {
		panic(err)
	}
	producer, err := kgo.NewClient(
		kgo.SeedBrokers(bootstrap),
		// murmur2 of the key, as Kafka's Java client: the workflow's partition
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	)
	if err != nil {
		panic(err)
	}
	// every partition of the replies topic, from its end (a reply is found by its key); replies
	// are written in transactions: read committed records only
	replies, err := kgo.NewClient(
		kgo.SeedBrokers(bootstrap),
		kgo.ConsumeTopics(namespace+".replies"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)
	if err != nil {
		panic(err)
	}
	c := &client{
		command:  mustSchema(dir, "Command.avsc"),
		reply:    mustSchema(dir, "Reply.avsc"),
		version:  byte(version),
		producer: producer,
		replies:  replies,
		commands: namespace + ".commands",
	}
	// one poll before any command is sent: the consumer's start (the end offsets) is fixed then
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	replies.PollFetches(ctx)
	cancel()
	return c
}

// send produces a command and returns the reply to it.
func (c *client) send(workflowID, bodyType string, body map[string]any) map[string]any {
	requestID := newID()
	cmd := map[string]any{
		"event_id":         newID(),
		"aggregate_key":    workflowID,
		"timestamp_ms":     time.Now().UnixMilli(),
		"trace_id":         nil,
		"request_id":       requestID,
		"idempotency_key":  requestID,
		"expected_version": nil,
		"run_id":           nil,
		"body":             map[string]any{"kadence." + bodyType: body},
		"span_id":          nil,
	}
	encoded, err := avro.Marshal(c.command, cmd)
	if err != nil {
		panic(err)
	}
	value := append([]byte{'K', c.version}, encoded...)
	ctx := context.Background()
	if err := c.producer.ProduceSync(ctx, &kgo.Record{Topic: c.commands, Key: []byte(workflowID), Value: value}).FirstErr(); err != nil {
		panic(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := c.replies.PollFetches(pctx)
		cancel()
		var found map[string]any
		fetches.EachRecord(func(r *kgo.Record) {
			if found == nil && string(r.Key) == requestID {
				found = map[string]any{}
				if err := avro.Unmarshal(c.reply, r.Value[2:], &found); err != nil {
					panic(err)
				}
			}
		})
		if found != nil {
			return found
		}
	}
	panic("no reply to " + requestID + " within 60 s")
}

func main() {
	c := newClient(os.Args[1], os.Args[2], os.Args[4])
	workflowID := os.Args[3]
	started := c.send(workflowID, "StartWorkflow", map[string]any{
		"workflow_type": "Greeter",
		"task_queue":    "greetings",
		"input":         []byte(`["Hi"]`), // the workflow's arguments, a JSON array
	})
	fmt.Printf("start: %v run %v\n", started["status"], started["run_id"])
	signal := c.send(workflowID, "SignalWorkflow", map[string]any{
		"signal_name": "name",
		"input":       []byte(`["Go"]`),
		"identity":    "go-example",
	})
	fmt.Printf("signal: %v\n", signal["status"])
	done := c.send(workflowID, "AwaitWorkflowResult", map[string]any{"wait": true})
	result, _ := done["result"].([]byte)
	fmt.Printf("result: %s\n", result)
	c.producer.Close()
	c.replies.Close()
}
