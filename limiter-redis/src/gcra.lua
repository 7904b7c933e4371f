-- limiter-redis: the whole GCRA decision for one key, atomically on Redis.
-- docs/distributed.md derives the math; src/script.rs documents the reply.
--
-- KEYS[1]  the limiter key; its value is tat, integer microseconds.
-- ARGV[1]  op: 'r' reserve (try = reserve with max_wait 0), 'l' lease, 'p' peek
-- ARGV[2]  t, the emission interval, integer µs >= 1
-- ARGV[3]  burst, integer >= 1 (tau = t * (burst - 1))
-- ARGV[4]  n, permits asked for, 0 <= n <= burst
-- ARGV[5]  'r': max_wait in µs; 'l': the most permits to lease (>= n)
-- ARGV[6]  extra ms added to the key's TTL (0 = expire exactly at tat)
-- ARGV[7]  now in µs, or '' to read Redis' own TIME
--
-- Every number is an integer below 2^53, so Lua's doubles hold it exactly;
-- division goes through math.fmod, which is exact, never through a rounded
-- quotient. A denial writes nothing.
-- Reply: { allowed (0|1), granted, remaining, wait, retry_after, reset_after }
-- with times in µs.

local LIMIT = 9007199254740991 -- 2^53 - 1

local key = KEYS[1]
local op = ARGV[1]
local t = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local arg = tonumber(ARGV[5])
local margin = tonumber(ARGV[6])

local now
if ARGV[7] == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
else
  now = tonumber(ARGV[7])
end

-- floor(a / b) for integers a >= 0, b >= 1, exactly.
local function idiv(a, b)
  return (a - math.fmod(a, b)) / b
end

-- Whole permits that fit in `room` µs (0 when room is negative).
local function permits(room)
  if room < t then
    return 0
  end
  return idiv(room, t)
end

local span = t * burst -- tau + t
local stored = redis.call('GET', key)
local tat = now
if stored then
  tat = tonumber(stored)
end
local base = math.max(tat, now)
-- room = now + tau + t - max(tat, now): what a request may cost right now.
local room = now + span - base

if op == 'p' then
  local a = permits(room)
  local retry = 0
  if a < 1 then
    retry = base + t - (now + span)
  end
  return { a >= 1 and 1 or 0, 0, a, 0, retry, base - now }
end

if n == 0 then
  return { 1, 0, permits(room), 0, 0, base - now }
end

local take = n
local max_wait = 0
if op == 'l' then
  local a = math.min(permits(room), arg)
  if a > take then
    take = a
  end
else
  max_wait = arg
end

-- The admission test, on exact integers: take * t <= now + tau + t - max(tat, now)
-- (+ max_wait for a reservation of a future slot).
if take * t > room + max_wait then
  return { 0, 0, permits(room), 0, base + n * t - (now + span), base - now }
end

local new_tat = base + take * t
if new_tat > LIMIT then
  return redis.error_reply('ERR limiter-redis: tat past 2^53 microseconds')
end
-- TTL = tat - now rounded up to the ms: the key lives exactly as long as it
-- differs from a fresh one.
local debt = new_tat - now
local ms = idiv(debt, 1000)
if math.fmod(debt, 1000) > 0 then
  ms = ms + 1
end
redis.call('SET', key, string.format('%d', new_tat), 'PX', string.format('%d', ms + margin))
local wait = new_tat - (now + span)
if wait < 0 then
  wait = 0
end
return { 1, take, permits(room - take * t), wait, 0, debt }
