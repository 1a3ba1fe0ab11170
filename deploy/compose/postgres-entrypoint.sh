#!/bin/sh
# First start: initialise $PGDATA with a superuser reachable only from inside the container
# (`postgres`, peer authentication), a login role $POSTGRES_USER that owns the database
# $POSTGRES_DB, and the extensions memoryd needs (pgvector's vector, pg_trgm). The role's
# password comes from $POSTGRES_PASSWORD_FILE (a mounted secret) or $POSTGRES_PASSWORD, and is
# never printed or put on a command line. Then PostgreSQL runs in the foreground.
set -eu
: "${POSTGRES_USER:=memoryd}" "${POSTGRES_DB:=memoryd}"
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
    POSTGRES_PASSWORD=$(cat "$POSTGRES_PASSWORD_FILE")
fi
export POSTGRES_PASSWORD="${POSTGRES_PASSWORD:-}" POSTGRES_USER POSTGRES_DB
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "$POSTGRES_PASSWORD" ]; then
        echo "postgres-entrypoint: set POSTGRES_PASSWORD_FILE or POSTGRES_PASSWORD" >&2
        exit 2
    fi
    initdb --username=postgres --auth-local=peer --auth-host=scram-sha-256 \
        --encoding=UTF8 --locale=C.UTF-8 >/dev/null
    {
        echo "listen_addresses = '*'"
        echo "unix_socket_directories = '${PGHOST:-/var/run/postgresql}'"
    } >> "$PGDATA/postgresql.conf"
    # Inside the container, the superuser by peer; over TCP (loopback included) only with TLS
    # and a password (the compose set starts PostgreSQL with ssl=on). initdb's own lines,
    # which let plaintext in over loopback, are replaced.
    printf 'local all all peer\nhostssl all all all scram-sha-256\n' > "$PGDATA/pg_hba.conf"
    pg_ctl --silent --wait --options="-c listen_addresses=''" start
    psql --quiet --no-psqlrc --username=postgres --dbname=postgres --set=ON_ERROR_STOP=1 <<'SQL'
\getenv user POSTGRES_USER
\getenv db POSTGRES_DB
\getenv password POSTGRES_PASSWORD
CREATE ROLE :"user" LOGIN PASSWORD :'password';
CREATE DATABASE :"db" OWNER :"user";
\connect :"db"
CREATE EXTENSION vector;
CREATE EXTENSION pg_trgm;
SQL
    pg_ctl --silent --wait stop
    echo "postgres-entrypoint: initialised $PGDATA (database $POSTGRES_DB owned by $POSTGRES_USER)"
fi
unset POSTGRES_PASSWORD
exec postgres "$@"
