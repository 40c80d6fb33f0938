#!/usr/bin/env bash
# Install (once) and start (idempotently) the services the test suite uses:
#   PostgreSQL  127.0.0.1:5432, database `test`, role `postgres` trusted from loopback
#   Redis       127.0.0.1:6379
# Both come from Debian's packages (`postgresql`, `redis-server`) and run as plain background
# processes, not through systemd (containers and CI machines run none). Running it again when both
# answer does nothing. Needs root or password-less sudo for apt-get the first time.
set -euo pipefail

PG_PORT=5432
REDIS_PORT=6379
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo -n"; fi

log() { echo "services: $*"; }

reachable() { # host port
  (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

apt_install() { # packages...
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]} (Debian packages)"
  export DEBIAN_FRONTEND=noninteractive
  # Package lists are fetched once per machine; a stale list that cannot find a package is refreshed.
  if [ ! -d /var/lib/apt/lists ] || [ -z "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v lock)" ]; then
    $SUDO apt-get update -qq
  fi
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
}

start_postgres() {
  if reachable 127.0.0.1 $PG_PORT; then
    log "PostgreSQL already answers on 127.0.0.1:$PG_PORT"
  else
    apt_install postgresql
    local version
    version=$(ls /usr/lib/postgresql | sort -V | tail -1)
    if ! pg_lsclusters -h 2>/dev/null | awk '{print $1" "$2}' | grep -qx "$version main"; then
      $SUDO pg_createcluster "$version" main >/dev/null
    fi
    local conf="/etc/postgresql/$version/main"
    # Loopback only, trusted: the suite connects as `postgres` without a password (any password it
    # sends, e.g. the store-URL tests', is accepted). Nothing listens beyond 127.0.0.1.
    $SUDO tee "$conf/conf.d/tablemgmt-tests.conf" >/dev/null <<EOF
listen_addresses = '127.0.0.1'
port = $PG_PORT
max_connections = 300
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
    $SUDO tee "$conf/pg_hba.conf" >/dev/null <<'EOF'
local   all all                trust
host    all all 127.0.0.1/32   trust
host    all all ::1/128        trust
EOF
    log "starting PostgreSQL $version (cluster main)"
    $SUDO pg_ctlcluster "$version" main start || $SUDO pg_ctlcluster "$version" main restart
    for _ in $(seq 1 60); do reachable 127.0.0.1 $PG_PORT && break; sleep 0.5; done
    reachable 127.0.0.1 $PG_PORT || { log "PostgreSQL did not start; see /var/log/postgresql/"; exit 1; }
  fi
  if ! psql -h 127.0.0.1 -p $PG_PORT -U postgres -tAc "select 1 from pg_database where datname='test'" \
      | grep -q 1; then
    psql -h 127.0.0.1 -p $PG_PORT -U postgres -qc "create database test" >/dev/null
    log "created database test"
  fi
}

start_redis() {
  if reachable 127.0.0.1 $REDIS_PORT; then
    log "Redis already answers on 127.0.0.1:$REDIS_PORT"
    return 0
  fi
  apt_install redis-server
  log "starting Redis"
  redis-server --bind 127.0.0.1 --port $REDIS_PORT --daemonize yes --save "" --appendonly no \
    --logfile /tmp/tablemgmt-redis.log --dir /tmp >/dev/null
  for _ in $(seq 1 40); do reachable 127.0.0.1 $REDIS_PORT && break; sleep 0.25; done
  reachable 127.0.0.1 $REDIS_PORT || { log "Redis did not start; see /tmp/tablemgmt-redis.log"; exit 1; }
}

start_postgres
start_redis
log "PostgreSQL 127.0.0.1:$PG_PORT (database test), Redis 127.0.0.1:$REDIS_PORT"
