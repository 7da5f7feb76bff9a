-- _time: the server clock and the keys' lifetimes, a fragment included by the other fragments.
--
-- No script receives a client's clock: every deadline is computed from TIME.

-- server_ms is the server time in milliseconds.
--@block server_ms() -> now
local t = redis.call('TIME')
now = t[1] * 1000 + math.floor(t[2] / 1000)
--@end

-- extend_ttl makes key k live at least ms more, extending its TTL, never shortening it (GT), or
-- setting it when the key has none (NX).
--@block extend_ttl(k, ms)
if redis.call('PEXPIRE', k, ms, 'GT') == 0 then
  redis.call('PEXPIRE', k, ms, 'NX')
end
--@end
