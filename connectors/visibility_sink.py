"""The visibility projection's writer: history events -> per-run records and indexes in Redis.

A batch of events becomes a list of small *ops* (only what visibility needs, never payloads)
applied by one Lua script call. The script is the idempotence guard: an event is applied only
if its seq is exactly the run's stored ``last_seq + 1``; a lower seq is a redelivery (ignored),
a higher one a gap (ignored and counted: the projection misses earlier events of that run,
which only happens after its keys were lost, and a rebuild repairs it). So redelivery and
replay change nothing, and a live writer and a rebuild can feed the same generation.

Key layout: ``kadence.readmodels.keys``. The script resolves the generation itself
(``mode = "live"``: the current generation plus the one a rebuild is filling, if any), so a
generation switch is atomic with respect to every batch.
"""

from __future__ import annotations

import json
from typing import Any

from kadence.topics.records import CLOSE_EVENTS, attrs, event_type
from kadence.topics.search_attributes import index_terms, to_json

#: Lua prologue of both projection scripts: ARGV[1] = the projection's base key, ARGV[2] = "live"
#: (the current generation, plus the one a rebuild is filling) or one generation number -> ``gens``
GENERATIONS_LUA = r"""
local base = ARGV[1]
local gens = {}
if ARGV[2] == 'live' then
  local cur = redis.call('GET', base .. ':gen') or '0'
  gens[1] = cur
  local b = redis.call('GET', base .. ':building')
  if b and b ~= cur then gens[2] = b end
else
  gens[1] = ARGV[2]
end
"""

__all__ = ["CLOSE_STATUS", "GENERATIONS_LUA", "VISIBILITY_LUA", "visibility_op"]

#: closing event -> status of the run (the engine's one definition)
CLOSE_STATUS = CLOSE_EVENTS


def _search(attrs: dict[str, Any]) -> dict[str, Any]:
    """An event's search attributes for the script: ``sa`` name -> the value's JSON form as JSON
    text, ``sat`` name -> its index terms (``topics.search_attributes``). Both are strings to the
    script, whose cjson would round numbers (it keeps 14 digits)."""
    wire = attrs.get("search_attributes") or {}
    shown = to_json(wire)
    return {
        "sa": {k: json.dumps(v, separators=(",", ":")) for k, v in shown.items()},
        "sat": {k: index_terms(v) for k, v in wire.items()},
    }


def visibility_op(
    event: dict[str, Any] | None, partition: int, offset: int, *, workflow_id: str = "", run_id: str = "", seq: int = 0
) -> str:
    """The JSON op of one history record (``event`` None: a tombstone of ``workflow_id/run_id/seq``)."""
    if event is None:
        return json.dumps({"k": "tomb", "w": workflow_id, "r": run_id, "s": seq, "p": partition, "o": offset})
    kind = event_type(event)
    a = attrs(event)
    op = {
        "k": "ev",
        "w": event["aggregate_key"],
        "r": event["run_id"],
        "s": event["seq"],
        "p": partition,
        "o": offset,
        "t": event["timestamp_ms"],
    }
    if kind == "WorkflowExecutionStarted":
        op.update(
            k="start",
            type=a["workflow_type"],
            tq=a["task_queue"],
            **_search(a),
            parent=a.get("parent_workflow_id") or "",
            cont=a.get("continued_from_run_id") or "",
        )
    elif kind == "SearchAttributesUpserted":
        op.update(k="sa", **_search(a))
    elif kind in CLOSE_STATUS:
        op.update(k="close", status=CLOSE_STATUS[kind], new_run=a.get("new_run_id") or "")
    elif kind == "WorkflowExecutionPaused":
        op.update(k="pause")
    elif kind == "WorkflowExecutionUnpaused":
        op.update(k="unpause")
    return json.dumps(op, separators=(",", ":"))


# ARGV[1] = projection base key, ARGV[2] = "live" or a generation number, ARGV[3..] = ops (JSON).
# Returns {applied, duplicates, gaps} (summed over the generations written).
VISIBILITY_LUA = (
    GENERATIONS_LUA
    + r"""
local SEP = '\31'
local INV = 9999999999999
local function member(ms, id) return string.format('%013d', INV - ms) .. '|' .. id end
local ops = {}
for i = 3, #ARGV do ops[#ops + 1] = cjson.decode(ARGV[i]) end
local applied, dups, gaps = 0, 0, 0

local function sa_index(G, k, v) return G .. 'i:sa:' .. k .. SEP .. v end
-- a record's index terms per attribute ('sat'); a record written before terms were kept holds
-- string values in 'sa', each its own term
local function sa_terms(rec)
  if rec.sat then return cjson.decode(rec.sat) end
  local terms = {}
  for k, v in pairs(cjson.decode(rec.sa)) do terms[k] = {v} end
  return terms
end

local function unindex_status(G, rec, id)
  local m = member(tonumber(rec.start_ms), id)
  redis.call('ZREM', G .. 'i:status:' .. rec.status, m)
  redis.call('ZREM', G .. 'i:ts:' .. rec.status .. ':' .. rec.type, m)
  local c = redis.call('HINCRBY', G .. 'counts', rec.status .. SEP .. rec.type, -1)
  if c <= 0 then redis.call('HDEL', G .. 'counts', rec.status .. SEP .. rec.type) end
end

local function index_status(G, rec, id)
  local m = member(tonumber(rec.start_ms), id)
  redis.call('ZADD', G .. 'i:status:' .. rec.status, 0, m)
  redis.call('ZADD', G .. 'i:ts:' .. rec.status .. ':' .. rec.type, 0, m)
  redis.call('HINCRBY', G .. 'counts', rec.status .. SEP .. rec.type, 1)
end

local function load(rk)
  local flat = redis.call('HGETALL', rk)
  if #flat == 0 then return nil end
  local rec = {}
  for i = 1, #flat, 2 do rec[flat[i]] = flat[i + 1] end
  return rec
end

local function remove(G, op)
  local id = op.w .. '/' .. op.r
  local rk = G .. 'run:' .. id
  local rec = load(rk)
  if not rec then return end
  unindex_status(G, rec, id)
  local m = member(tonumber(rec.start_ms), id)
  redis.call('ZREM', G .. 'i:all', m)
  redis.call('ZREM', G .. 'i:paused', m)
  redis.call('ZREM', G .. 'i:type:' .. rec.type, m)
  for k, terms in pairs(sa_terms(rec)) do
    for _, v in ipairs(terms) do redis.call('ZREM', sa_index(G, k, v), m) end
  end
  if rec.close_ms and rec.close_ms ~= '' then
    redis.call('ZREM', G .. 'i:close', member(tonumber(rec.close_ms), id))
  end
  redis.call('DEL', rk)
  if redis.call('GET', G .. 'wf:' .. op.w) == op.r then redis.call('DEL', G .. 'wf:' .. op.w) end
end

local function apply(G, op)
  local id = op.w .. '/' .. op.r
  local rk = G .. 'run:' .. id
  local last = tonumber(redis.call('HGET', rk, 'last_seq') or '0')
  if op.s <= last then dups = dups + 1 return end
  if op.s ~= last + 1 or (last == 0 and op.k ~= 'start') then gaps = gaps + 1 return end
  if op.k == 'start' then
    local rec = {type = op.type, status = 'running', start_ms = op.t}
    local m = member(op.t, id)
    redis.call('HSET', rk, 'workflow_id', op.w, 'run_id', op.r, 'type', op.type, 'status', 'running',
      'task_queue', op.tq, 'start_ms', op.t, 'close_ms', '', 'sa', cjson.encode(op.sa),
      'sat', cjson.encode(op.sat), 'parent', op.parent, 'cont', op.cont, 'new_run', '')
    redis.call('ZADD', G .. 'i:all', 0, m)
    redis.call('ZADD', G .. 'i:type:' .. op.type, 0, m)
    index_status(G, rec, id)
    for k, terms in pairs(op.sat) do
      for _, v in ipairs(terms) do redis.call('ZADD', sa_index(G, k, v), 0, m) end
    end
    redis.call('SET', G .. 'wf:' .. op.w, op.r)
  elseif op.k == 'sa' then
    local rec = load(rk)
    local m = member(tonumber(rec.start_ms), id)
    local sa, sat = cjson.decode(rec.sa), sa_terms(rec)
    if not rec.sat then  -- written before values were JSON text: quote them
      for k, v in pairs(sa) do sa[k] = cjson.encode(v) end
    end
    for k, terms in pairs(op.sat) do
      for _, v in ipairs(sat[k] or {}) do redis.call('ZREM', sa_index(G, k, v), m) end
      for _, v in ipairs(terms) do redis.call('ZADD', sa_index(G, k, v), 0, m) end
      sat[k] = terms
      sa[k] = op.sa[k]
    end
    redis.call('HSET', rk, 'sa', cjson.encode(sa), 'sat', cjson.encode(sat))
  elseif op.k == 'close' then
    local rec = load(rk)
    if rec.status == 'running' then
      unindex_status(G, rec, id)
      rec.status = op.status
      index_status(G, rec, id)
      redis.call('ZADD', G .. 'i:close', 0, member(op.t, id))
      redis.call('HSET', rk, 'status', op.status, 'close_ms', op.t, 'new_run', op.new_run, 'paused', '')
      redis.call('ZREM', G .. 'i:paused', member(tonumber(rec.start_ms), id))
    end
  elseif op.k == 'pause' or op.k == 'unpause' then
    local rec = load(rk)
    local m = member(tonumber(rec.start_ms), id)
    if op.k == 'pause' then
      redis.call('HSET', rk, 'paused', '1')
      redis.call('ZADD', G .. 'i:paused', 0, m)
    else
      redis.call('HSET', rk, 'paused', '')
      redis.call('ZREM', G .. 'i:paused', m)
    end
  end
  redis.call('HSET', rk, 'last_seq', op.s, 'offset', op.o, 'partition', op.p)
  applied = applied + 1
end

for _, g in ipairs(gens) do
  local G = base .. ':g' .. g .. ':'
  local pos = {}
  for _, op in ipairs(ops) do
    if op.k == 'tomb' then remove(G, op) else apply(G, op) end
    local nxt = op.o + 1
    if not pos[op.p] or pos[op.p] < nxt then pos[op.p] = nxt end
  end
  for p, nxt in pairs(pos) do
    local have = tonumber(redis.call('HGET', G .. 'pos', p) or '-1')
    if nxt > have then redis.call('HSET', G .. 'pos', p, nxt) end
  end
end
return {applied, dups, gaps}
"""
)
