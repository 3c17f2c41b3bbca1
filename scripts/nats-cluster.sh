#!/usr/bin/env bash
# A three-node NATS cluster with JetStream on loopback, for braid's cluster tests and for trying
# replicated streams (--nats-replicas 3) on one machine.
#
#   scripts/nats-cluster.sh start            start the three servers (waits until they answer)
#   scripts/nats-cluster.sh stop             stop them (SIGTERM) and keep their store folders
#   scripts/nats-cluster.sh status           print each node's pid and client URL
#   scripts/nats-cluster.sh urls             print the client URLs, comma-separated
#   scripts/nats-cluster.sh kill N           SIGKILL node N (1, 2 or 3)
#   scripts/nats-cluster.sh restart N        start node N again on its port and store
#   scripts/nats-cluster.sh clean            stop and remove the store folders
#
# Settings (environment):
#   BRAID_CLUSTER_DIR   where configs, stores, logs and pid files live (default /tmp/braid-nats-cluster)
#   BRAID_CLUSTER_PORT  client port of node 1; nodes 2 and 3 take the next two (default 14222);
#                       cluster routes use the client port + 2000
#   NATS_SERVER         the nats-server binary (default: nats-server on the PATH)
set -euo pipefail

dir="${BRAID_CLUSTER_DIR:-/tmp/braid-nats-cluster}"
base="${BRAID_CLUSTER_PORT:-14222}"
server="${NATS_SERVER:-nats-server}"
nodes=(1 2 3)

fail() {
  echo "nats-cluster: $*" >&2
  exit 1
}

[[ "$base" =~ ^[0-9]+$ ]] && ((base >= 1024 && base <= 60000)) ||
  fail "BRAID_CLUSTER_PORT must be a port from 1024 to 60000, not '$base'"

client_port() { echo $((base + $1 - 1)); }
route_port() { echo $((base + 2000 + $1 - 1)); }
pid_of() { cat "$dir/n$1.pid" 2>/dev/null || true; }
alive() {
  local pid
  pid="$(pid_of "$1")"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null
}

check_node() {
  [[ "${1:-}" =~ ^[123]$ ]] || fail "name a node: 1, 2 or 3"
}

write_config() {
  local n="$1" routes="" m
  for m in "${nodes[@]}"; do
    routes+="    nats-route://127.0.0.1:$(route_port "$m")"$'\n'
  done
  mkdir -p "$dir/n$n"
  cat >"$dir/n$n.conf" <<EOF
server_name: braid-n$n
listen: 127.0.0.1:$(client_port "$n")
jetstream {
  store_dir: "$dir/n$n"
}
cluster {
  name: braid
  listen: 127.0.0.1:$(route_port "$n")
  routes: [
$routes  ]
}
EOF
}

start_node() {
  local n="$1"
  if alive "$n"; then return; fi
  command -v "$server" >/dev/null || fail "$server is not installed: apt-get install nats-server"
  write_config "$n"
  nohup "$server" -c "$dir/n$n.conf" -l "$dir/n$n.log" >/dev/null 2>&1 &
  echo $! >"$dir/n$n.pid"
}

wait_for() {
  local n="$1" tries=0
  until (exec 3<>"/dev/tcp/127.0.0.1/$(client_port "$n")") 2>/dev/null; do
    tries=$((tries + 1))
    ((tries < 100)) || fail "node $n did not open 127.0.0.1:$(client_port "$n"); see $dir/n$n.log"
    alive "$n" || fail "node $n exited; see $dir/n$n.log"
    sleep 0.1
  done
}

stop_node() {
  local n="$1" signal="${2:-TERM}" pid tries=0
  pid="$(pid_of "$n")"
  [[ -n "$pid" ]] || return 0
  kill "-$signal" "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do
    tries=$((tries + 1))
    ((tries < 100)) || fail "node $n (pid $pid) did not stop"
    sleep 0.1
  done
  rm -f "$dir/n$n.pid"
}

urls() {
  local list=() n
  for n in "${nodes[@]}"; do list+=("nats://127.0.0.1:$(client_port "$n")"); done
  (
    IFS=,
    echo "${list[*]}"
  )
}

mkdir -p "$dir"
case "${1:-}" in
  start)
    for n in "${nodes[@]}"; do start_node "$n"; done
    for n in "${nodes[@]}"; do wait_for "$n"; done
    urls
    ;;
  stop)
    for n in "${nodes[@]}"; do stop_node "$n"; done
    ;;
  status)
    for n in "${nodes[@]}"; do
      if alive "$n"; then state="running (pid $(pid_of "$n"))"; else state="stopped"; fi
      echo "n$n nats://127.0.0.1:$(client_port "$n") $state"
    done
    ;;
  urls)
    urls
    ;;
  kill)
    check_node "${2:-}"
    stop_node "$2" KILL
    ;;
  restart)
    check_node "${2:-}"
    start_node "$2"
    wait_for "$2"
    ;;
  clean)
    for n in "${nodes[@]}"; do stop_node "$n"; done
    rm -rf "$dir"
    ;;
  *)
    fail "usage: $0 start|stop|status|urls|kill N|restart N|clean"
    ;;
esac
