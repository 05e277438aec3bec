#!/bin/sh
# A private PostgreSQL 15 for tests and benchmarks, in a directory of its own:
# its data, its log and its unix socket all live under DIR, it listens on
# that socket and on 127.0.0.1 at a free port, and nothing of it outlives
# `destroy` (or the end of `run`).
#
#   pgtmp.sh init DIR        initdb into DIR/data, start, create database "yard"
#                            (PGTMP_LISTEN=ADDR,...: also listen there, and let
#                            hosts of the server's own subnets in by password);
#                            writes DIR/url (postgres://yard:PASSWORD@127.0.0.1:PORT/yard,
#                            password authentication) and DIR/socket-url (the unix
#                            socket, no password), and prints the url
#   pgtmp.sh start DIR       start the server of DIR again (same port, same socket)
#   pgtmp.sh stop DIR        stop it (fast shutdown: open transactions are rolled back)
#   pgtmp.sh destroy DIR     stop it and remove DIR
#   pgtmp.sh run CMD ARG...  a new DIR under $TMPDIR, init, CMD with YARD_TEST_PG set to
#                            the url (YARD_TEST_PG_DIR to DIR), then destroy, also when
#                            CMD fails or the script is killed by SIGINT/SIGTERM. When
#                            the server cannot be started CMD still runs, without
#                            YARD_TEST_PG (its PostgreSQL cases then fail), and run fails.
#                            DIR/owner holds the script's pid: a server whose owner was
#                            SIGKILLed is removed by tests/e2e/pgserver.py's sweep().
#
# initdb and pg_ctl refuse to run as root: as root they run as the user
# "postgres" (Debian's postgresql package creates it; PGTMP_USER overrides).
# PGBIN (default /usr/lib/postgresql/15/bin) is where the server's programs are.
set -u

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PGTMP_USER=${PGTMP_USER:-postgres}

die() {
	echo "pgtmp: $*" >&2
	exit 1
}

# as_owner CMD...: runs CMD as the server's owner
as_owner() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u "$PGTMP_USER" -- "$@"
	else
		"$@"
	fi
}

check_installed() {
	[ -x "$PGBIN/initdb" ] && [ -x "$PGBIN/pg_ctl" ] ||
		die "PostgreSQL 15 is not installed (no '$PGBIN/initdb'): make deps installs it (Debian: postgresql, libpq-dev)"
	if [ "$(id -u)" = 0 ]; then
		id -u "$PGTMP_USER" >/dev/null 2>&1 ||
			die "user '$PGTMP_USER' does not exist: the server cannot run as root (PGTMP_USER names another user)"
	fi
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
	dir=$1
	port=$(cat "$dir/port") || die "'$dir' holds no server (no port file)"
	listen=127.0.0.1
	[ -f "$dir/listen" ] && listen=$(cat "$dir/listen")
	as_owner "$PGBIN/pg_ctl" start -w -t 60 -D "$dir/data" -l "$dir/server.log" \
		-o "-p $port -k $dir/sock -c listen_addresses=$listen" >/dev/null ||
		{ tail -n 20 "$dir/server.log" >&2; return 1; }
}

stop() {
	dir=$1
	[ -f "$dir/data/postmaster.pid" ] || return 0
	as_owner "$PGBIN/pg_ctl" stop -w -t 30 -m fast -D "$dir/data" >/dev/null 2>&1 && return 0
	as_owner "$PGBIN/pg_ctl" stop -w -t 10 -m immediate -D "$dir/data" >/dev/null 2>&1 && return 0
	pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null)
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	return 0
}

init() {
	dir=$1
	check_installed
	mkdir -p "$dir/sock" || die "cannot create '$dir'"
	chmod 700 "$dir"
	[ "$(id -u)" = 0 ] && chown -R "$PGTMP_USER" "$dir"
	password=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
	printf '%s\n' "$password" >"$dir/pwfile"
	[ "$(id -u)" = 0 ] && chown "$PGTMP_USER" "$dir/pwfile"
	as_owner "$PGBIN/initdb" -D "$dir/data" -U yard -E UTF8 --locale=C --no-sync \
		--auth-local=trust --auth-host=scram-sha-256 --pwfile="$dir/pwfile" >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; die "initdb failed"; }
	rm -f "$dir/pwfile"
	if [ -n "${PGTMP_LISTEN:-}" ]; then
		# more addresses (a test's network namespaces reach it on a bridge)
		printf '127.0.0.1,%s\n' "$PGTMP_LISTEN" >"$dir/listen"
		echo "host all all samenet scram-sha-256" >>"$dir/data/pg_hba.conf"
	fi
	# a port another server took between free_port and the start: try again
	for try in 1 2 3 4 5; do
		free_port >"$dir/port" || die "cannot find a free port"
		start "$dir" && break
		[ "$try" = 5 ] && die "the server did not start (log: '$dir/server.log')"
	done
	port=$(cat "$dir/port")
	as_owner "$PGBIN/createdb" -h "$dir/sock" -p "$port" -U yard yard || die "createdb failed"
	printf 'postgres://yard:%s@127.0.0.1:%s/yard\n' "$password" "$port" >"$dir/url"
	printf 'postgresql://yard@/yard?host=%s&port=%s\n' "$dir/sock" "$port" >"$dir/socket-url"
	cat "$dir/url"
}

destroy() {
	dir=$1
	[ -d "$dir" ] || return 0
	stop "$dir"
	rm -rf "$dir"
}

run() {
	dir=$(mktemp -d "${TMPDIR:-/tmp}/yard-pg-XXXXXX") || die "cannot make a temp dir"
	trap 'destroy "$dir"' EXIT
	echo $$ >"$dir/owner" # what tests/e2e/pgserver.py's sweep() looks at
	trap 'exit 130' INT
	trap 'exit 143' TERM
	started=0
	if url=$(init "$dir"); then
		started=1
		YARD_TEST_PG=$url YARD_TEST_PG_DIR=$dir "$@"
	else
		echo "pgtmp: no PostgreSQL server for '$*': its PostgreSQL cases fail" >&2
		env -u YARD_TEST_PG -u YARD_TEST_PG_DIR "$@"
	fi
	rc=$?
	[ "$started" = 1 ] || [ "$rc" != 0 ] || rc=1
	exit "$rc"
}

[ $# -ge 1 ] || die "usage: pgtmp.sh init|start|stop|destroy DIR, or pgtmp.sh run CMD ARG..."
cmd=$1
shift
case $cmd in
init | start | stop | destroy)
	[ $# = 1 ] || die "usage: pgtmp.sh $cmd DIR"
	"$cmd" "$1"
	;;
run)
	[ $# -ge 1 ] || die "usage: pgtmp.sh run CMD ARG..."
	run "$@"
	;;
*) die "unknown command '$cmd'" ;;
esac
