#!/usr/bin/env bash
# Simulated hosts on one machine, for tests and benches across hosts: each
# host is a network namespace with its own address and its own /dev/shm
# (so processes on two hosts share no memory and talk only by their
# sockets), joined by a bridge; links may be shaped to a rate by tbf.
#
#   scripts/hosts.sh up NAME N [RATE]    hosts 0..N-1 of the set NAME;
#                                        prints each host's address
#   scripts/hosts.sh run NAME K CMD...   runs CMD on host K (exec: its exit
#                                        status is CMD's); K may also be
#                                        the host's address
#   scripts/hosts.sh addr NAME K         host K's address
#   scripts/hosts.sh shape NAME RATE     every link, both ways, at RATE
#   scripts/hosts.sh kill NAME K         host K dies: its link goes down,
#                                        then every process on it is
#                                        SIGKILLed (no FIN, no RST leaves)
#   scripts/hosts.sh cut NAME J K        a partition between hosts J and
#                                        K: neither reaches the other (each
#                                        has a blackhole route to the other:
#                                        sends fail, nothing arrives); every
#                                        other path stays
#   scripts/hosts.sh heal NAME J K       ends that partition
#   scripts/hosts.sh down NAME           ends every process on the set's
#                                        hosts and removes them
#
# NAME: 1-6 letters or digits (interface names are at most 15 bytes); N at
# most 99. RATE: a tc rate such as 100mbit, 1gbit or 10gbit, or "none"
# (unshaped). Each direction of a host's link gets its own token bucket
# holding about 1 ms of the rate (at least two full frames): a bucket of
# megabytes would let a direction that was idle bank tokens and burst at
# memory speed, so that one direction at a time would look like both at
# once. The queues in front of the buckets are a host's and a switch's: a
# host's own way out holds 100 ms of the rate (a NIC's queue: Debian's
# fq_codel holds 10,240 packets, 15 MB), so that it drops nothing a real
# host would; the switch's port toward a host holds 5 ms (a shallow
# switch's buffer), where several senders at once (incast) lose packets
# as they do in a real network. The kernel here has tbf but not netem:
# links add no delay, and lose only what a full queue drops.
#
# Host K is named pd<NAME>h<K>: its host name, and in every host's
# /etc/hosts (a file of the set's, bound there by `run`).
#
# Addresses: 198.18.S.(K+1)/24, S = HOSTS_SUBNET (default 0), in RFC 2544's
# range for benchmarking; they exist only inside the set's namespaces, and
# every set has its own bridge, so sets made at once by parallel tests do
# not meet. Needs root, iproute2 (ip, tc) and util-linux (unshare). State:
# /run/paramd-hosts/NAME. `down` always cleans up what `up` made, also
# after a partial `up`.
set -euo pipefail

usage() {
  sed -n '7,24p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

STATE_ROOT=${HOSTS_STATE:-/run/paramd-hosts}

check_name() {
  [[ "$1" =~ ^[A-Za-z0-9]{1,6}$ ]] || {
    echo "hosts.sh: NAME '$1' must be 1-6 letters or digits" >&2
    exit 2
  }
}
netns() { echo "pd${1}h$2"; }
bridge() { echo "pd${1}br"; }
addr_of() { echo "198.18.${HOSTS_SUBNET:-0}.$(($2 + 1))"; }
count_of() { cat "$STATE_ROOT/$1/count" 2>/dev/null || echo 0; }

# tc's rate as bits per second (100mbit, 1gbit, 2.5gbit, 800kbit, 1000000).
rate_bits() {
  local r=${1,,} n unit
  [[ "$r" =~ ^([0-9]+(\.[0-9]+)?)(kbit|mbit|gbit|bit)?$ ]] || {
    echo "hosts.sh: RATE '$1' is not a rate such as 100mbit or 1gbit" >&2
    exit 2
  }
  n=${BASH_REMATCH[1]}
  unit=${BASH_REMATCH[3]:-bit}
  # %.0f, not %d: Debian's awk (mawk) clamps %d to 2^31 - 1, which made
  # every rate above 2.147 Gbit/s that rate.
  case $unit in
    kbit) awk -v n="$n" 'BEGIN { printf "%.0f", n * 1e3 }' ;;
    mbit) awk -v n="$n" 'BEGIN { printf "%.0f", n * 1e6 }' ;;
    gbit) awk -v n="$n" 'BEGIN { printf "%.0f", n * 1e9 }' ;;
    bit) awk -v n="$n" 'BEGIN { printf "%.0f", n }' ;;
  esac
}

shape() {
  local name=$1 rate=$2 n k bits burst
  n=$(count_of "$name")
  for ((k = 0; k < n; k++)); do
    if [[ "$rate" == none ]]; then
      ip netns exec "$(netns "$name" "$k")" tc qdisc del dev e0 root \
        2>/dev/null || true
      tc qdisc del dev "pd${name}v$k" root 2>/dev/null || true
      continue
    fi
    bits=$(rate_bits "$rate")
    burst=$((bits / 8000))  # 1 ms of the rate, in bytes
    ((burst < 3028)) && burst=3028
    # Egress of the host (its NIC's queue), and (on the bridge's side, the
    # switch's port) its ingress.
    ip netns exec "$(netns "$name" "$k")" \
      tc qdisc replace dev e0 root tbf rate "$bits" burst "$burst" \
      latency 100ms
    tc qdisc replace dev "pd${name}v$k" root tbf rate "$bits" burst "$burst" \
      latency 5ms
  done
}

# Ends every process on host K (bounded wait: 5 s).
kill_processes() {
  local ns pids
  ns=$(netns "$1" "$2")
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  [[ -n "$pids" ]] || return 0
  kill -KILL $pids 2>/dev/null || true
  for _ in $(seq 50); do
    [[ -z "$(ip netns pids "$ns" 2>/dev/null)" ]] && return 0
    sleep 0.1
  done
}

# Host K dies as a machine does: its link first, so that its peers hear
# nothing more from it (no FIN or RST from the kernel closing its
# sockets), then its processes.
kill_host() {
  local name=$1 k=$2
  [[ -d "$STATE_ROOT/$name/shm$k" ]] || {
    echo "hosts.sh: no host $k in the set '$name'" >&2
    exit 1
  }
  ip link set "pd${name}v$k" down
  kill_processes "$name" "$k"
}

# The route between hosts J and K, both ways: "add" cuts, "del" heals.
partition() {
  local verb=$1 name=$2 j=$3 k=$4 h
  for h in "$j" "$k"; do
    [[ -d "$STATE_ROOT/$name/shm$h" ]] || {
      echo "hosts.sh: no host $h in the set '$name'" >&2
      exit 1
    }
  done
  ip -n "$(netns "$name" "$j")" route "$verb" blackhole \
    "$(addr_of "$name" "$k")/32"
  ip -n "$(netns "$name" "$k")" route "$verb" blackhole \
    "$(addr_of "$name" "$j")/32"
}

down() {
  local name=$1 n k ns
  n=$(count_of "$name")
  for ((k = 0; k < n; k++)); do
    ns=$(netns "$name" "$k")
    ip netns list 2>/dev/null | grep -qw "$ns" || continue
    # A namespace lives on while a process in it runs: end them first.
    kill_processes "$name" "$k"
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "$(bridge "$name")" 2>/dev/null || true
  rm -rf "${STATE_ROOT:?}/$name"
}

up() {
  local name=$1 n=$2 rate=${3:-none} k ns
  [[ "$n" =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 99)) || {
    echo "hosts.sh: N '$n' must be 1 to 99" >&2
    exit 2
  }
  [[ "$rate" == none ]] || rate_bits "$rate" >/dev/null
  if [[ -e "$STATE_ROOT/$name" ]]; then
    echo "hosts.sh: the set '$name' exists (hosts.sh down $name)" >&2
    exit 1
  fi
  mkdir -p "$STATE_ROOT/$name"
  echo "$n" >"$STATE_ROOT/$name/count"
  trap 'down "$name"' ERR
  ip link add "$(bridge "$name")" type bridge
  ip link set "$(bridge "$name")" up
  for ((k = 0; k < n; k++)); do
    ns=$(netns "$name" "$k")
    mkdir -p "$STATE_ROOT/$name/shm$k"
    ip netns add "$ns"
    ip link add "pd${name}v$k" type veth peer name e0 netns "$ns"
    ip link set "pd${name}v$k" master "$(bridge "$name")" up
    ip -n "$ns" addr add "$(addr_of "$name" "$k")/24" dev e0
    ip -n "$ns" link set e0 up
    ip -n "$ns" link set lo up
  done
  # Each host resolves every host's name (pd<NAME>h<K>) by its own
  # /etc/hosts (run binds this file there).
  {
    echo "127.0.0.1 localhost"
    for ((k = 0; k < n; k++)); do
      echo "$(addr_of "$name" "$k") $(netns "$name" "$k")"
    done
  } >"$STATE_ROOT/$name/hosts"
  shape "$name" "$rate"
  trap - ERR
  for ((k = 0; k < n; k++)); do echo "$(addr_of "$name" "$k")"; done
}

run() {
  local name=$1 k=$2
  shift 2
  (($# > 0)) || usage
  # A host's address names it too (198.18.S.(K+1)).
  [[ "$k" == *.*.*.* ]] && k=$((${k##*.} - 1))
  local ns
  ns=$(netns "$name" "$k")
  [[ -d "$STATE_ROOT/$name/shm$k" ]] || {
    echo "hosts.sh: no host $k in the set '$name'" >&2
    exit 1
  }
  # Its own mount namespace, with the host's directory as /dev/shm and
  # the set's names as /etc/hosts, and its own host name.
  exec ip netns exec "$ns" unshare --mount --uts --propagation private \
    sh -c 'mount --bind "$1" /dev/shm && mount --bind "$2" /etc/hosts &&
      hostname "$3" && shift 3 && exec "$@"' \
    hosts.sh "$STATE_ROOT/$name/shm$k" "$STATE_ROOT/$name/hosts" "$ns" "$@"
}

(($# >= 2)) || usage
command=$1
name=$2
check_name "$name"
case $command in
  up) (($# >= 3)) || usage; up "$name" "$3" "${4:-none}" ;;
  run) (($# >= 4)) || usage; shift 2; run "$name" "$@" ;;
  addr) (($# == 3)) || usage; addr_of "$name" "$3" ;;
  shape) (($# == 3)) || usage; shape "$name" "$3" ;;
  kill) (($# == 3)) || usage; kill_host "$name" "$3" ;;
  cut) (($# == 4)) || usage; partition add "$name" "$3" "$4" ;;
  heal) (($# == 4)) || usage; partition del "$name" "$3" "$4" ;;
  down) down "$name" ;;
  *) usage ;;
esac
