# Sourced by the benchmark scripts that need a Redis: a redis-server of their own.

# start_redis WORK: starts a redis-server on a free loopback port, saving nothing, its files in
# WORK; sets `port`, and on exit stops the server and removes WORK. Fails when the server does
# not answer within 5 s.
start_redis() {
  local work=$1
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
    --logfile "$work/redis.log" &
  redis_pid=$!
  redis_work=$work
  trap 'kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; rm -rf "$redis_work"' EXIT
  local _
  for _ in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "redis-server did not answer on port $port (log: $work/redis.log)" >&2
  return 1
}
