#!/usr/bin/env bash
# Upgrade the order-fulfilment sample from build v1 to build v2 without stopping it
# (docs/upgrading.md). Run it with the dev stack, which starts Kafka, runs this, stops Kafka:
#
#     python3 scripts/devstack.py run -- bash docs/examples/upgrade_sample.sh
#
# v2 (kadence.samples.order_fulfilment_v2) is not replay-compatible with v1: orders started on v1
# finish on v1, new orders start on v2, and v1's worker stops once nothing waits for it.
set -euo pipefail
KADENCE="${KADENCE:-.venv/bin/kadence} --log-level warning"
export KADENCE_NAMESPACE="${KADENCE_NAMESPACE:-upgrade$RANDOM}"
METRICS_PORT="${METRICS_PORT:-9464}"
ORDER='{"customer": "ada@example.com", "lines": [{"sku": "KAF-1", "qty": 2, "price_cents": 1250}]}'
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true' EXIT

promoted() {  # until the history processor has switched the queue's default build to $1
  for _ in $(seq 150); do
    curl -sf "127.0.0.1:$METRICS_PORT/metrics" | grep -q "^kadence_build_default{build=\"$1\",namespace=\"[^\"]*\",task_queue=\"orders\"} 1.0" && return 0
    sleep 0.2
  done
  echo "build $1 not promoted" >&2; return 1
}
build_of() {  # the build that ran the last workflow task of a workflow
  $KADENCE history "$1" | grep -o '"build_id": "[^"]*"' | tail -1
}

# 0. the engine
$KADENCE topics apply --queue orders >/dev/null
$KADENCE processor --metrics-port "$METRICS_PORT" & pids+=($!)

# 1. today: build v1 serves task queue "orders" and new orders start on it
$KADENCE builds promote orders v1
$KADENCE worker --task-queue orders --module kadence.samples.order_fulfilment --build-id v1 & v1=$!; pids+=($v1)
promoted v1
$KADENCE start OrderFulfilment --id order-1 --task-queue orders --input "[{\"order_id\": \"order-1\", ${ORDER:1}]" --wait

# 2. deploy v2 beside v1 and promote it: new orders start on v2, open v1 orders stay on v1
$KADENCE worker --task-queue orders --module kadence.samples.order_fulfilment_v2 --build-id v2 --promote & pids+=($!)
promoted v2
$KADENCE start OrderFulfilment --id order-2 --task-queue orders --input "[{\"order_id\": \"order-2\", ${ORDER:1}]" --wait

# 3. watch v1 drain: stop its workers when its backlog and its open workflows are both 0
$KADENCE builds list orders --count-open
echo "order-1 ran on $(build_of order-1), order-2 on $(build_of order-2)"
kill "$v1"
echo "upgrade done: v1 stopped"
