# shellcheck shell=bash
# The pid files of the services scripts/services.sh starts. Sourced by scripts/services.sh; defines
# pidfile_pid, killed_uncleanly and stop_pidfile.

# pidfile_pid PIDFILE: print the pid PIDFILE holds and succeed when that process is alive and is
# the service the file belongs to: its command line names the file's directory (every service here
# is started with its configuration or data under the directory of its pid file). A live pid alone
# proves nothing: the file of a broker killed without shutting down (at the end of a session,
# after a reboot) names a number the system may since have given to an unrelated process. A CI
# run hit that: the secure Pulsar was taken for running, never started, and its tests failed.
pidfile_pid() {
  local file=$1 pid cmdline
  [ -s "$file" ] || return 1
  pid=$(<"$file")
  pid=${pid//[[:space:]]/}
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  cmdline=$( { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null) || return 1
  [[ $cmdline == *"$(dirname "$file")/"* ]] || return 1
  echo "$pid"
}

# killed_uncleanly PIDFILE: true when PIDFILE names a pid but its service is not running
# (pidfile_pid). An empty file is not: a starter is between creating it and writing the pid.
# stop_pidfile removes the file of a process it stopped, so a file left behind means the broker
# was killed without shutting down (as at the end of a session) or died on its own. Its data is
# then thrown away on the next start: a test broker holds nothing worth keeping, recovering
# thousands of unclean partitions took Kafka 2 minutes, and the topics every run leaves behind
# made each later run slower.
killed_uncleanly() {
  [ -s "$1" ] || return 1
  ! pidfile_pid "$1" >/dev/null
}

# stop_pidfile PIDFILE: stop the service PIDFILE names (TERM, then KILL after 60 s) and remove
# the file. A service that is not running (gone, or its pid now someone else's) is left alone, and
# so is its file, so that the next start knows (killed_uncleanly).
stop_pidfile() {
  local pidfile=$1 pid
  pid=$(pidfile_pid "$pidfile") || return 0
  if kill "$pid" 2>/dev/null; then
    # Waited for and killed only while the pid is still the service's (it may be reused once
    # the service has exited).
    for _ in $(seq 1 60); do pidfile_pid "$pidfile" >/dev/null || break; sleep 1; done
    if pidfile_pid "$pidfile" >/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
    rm -f "$pidfile"
  fi
}
