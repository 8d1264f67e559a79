"""The history read model's writer: each run's events appended, in order, to a Redis list.

The list index is ``seq - 1``, so the guard is the list's length: an event is appended only when
``LLEN == seq - 1`` (a redelivery has ``seq <= LLEN``; a higher seq is a gap and is skipped).
A tombstone (archival) removes the run's list. Generation resolution as in
``visibility_sink``.
"""

from __future__ import annotations

from .visibility_sink import GENERATIONS_LUA

__all__ = ["HISTORY_LUA"]

# ARGV[1] = projection base key, ARGV[2] = "live" or a generation number, then groups of six:
# workflow_id, run_id, seq, partition, offset, value (Avro wire bytes; "" = tombstone).
# Returns {applied, duplicates, gaps}.
HISTORY_LUA = (
    GENERATIONS_LUA
    + r"""
local applied, dups, gaps = 0, 0, 0
for _, g in ipairs(gens) do
  local G = base .. ':g' .. g .. ':'
  local pos = {}
  for i = 3, #ARGV, 6 do
    local w, r, s, p, o, v = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3], tonumber(ARGV[i + 4]), ARGV[i + 5]
    local lk = G .. 'ev:' .. w .. '/' .. r
    if v == '' then
      redis.call('DEL', lk)
      if redis.call('GET', G .. 'latest:' .. w) == r then redis.call('DEL', G .. 'latest:' .. w) end
    else
      local n = redis.call('LLEN', lk)
      if s <= n then dups = dups + 1
      elseif s ~= n + 1 then gaps = gaps + 1
      else
        redis.call('RPUSH', lk, v)
        if s == 1 then redis.call('SET', G .. 'latest:' .. w, r) end
        applied = applied + 1
      end
    end
    if not pos[p] or pos[p] < o + 1 then pos[p] = o + 1 end
  end
  for p, nxt in pairs(pos) do
    local have = tonumber(redis.call('HGET', G .. 'pos', p) or '-1')
    if nxt > have then redis.call('HSET', G .. 'pos', p, nxt) end
  end
end
return {applied, dups, gaps}
"""
)
