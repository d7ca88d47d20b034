package faultinject

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// localPorts returns the local TCP ports of the sockets the processes hold open, read from
// /proc (Linux): each process's socket inodes, matched against /proc/net/tcp and tcp6. The
// database sees a relay's connections as coming from these ports (pg_stat_activity.client_port,
// the port in MariaDB's PROCESSLIST host), which tells one relay's connections from another's
// and from this process's own, without any help from the relay.
func localPorts(pids []int) (map[int]bool, error) {
	inodes := map[string]bool{}
	for _, pid := range pids {
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue // the process exited meanwhile
		}
		for _, e := range entries {
			link, err := os.Readlink(filepath.Join(dir, e.Name()))
			if err == nil && strings.HasPrefix(link, "socket:[") && strings.HasSuffix(link, "]") {
				inodes[link[len("socket:["):len(link)-1]] = true
			}
		}
	}
	ports := map[int]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			if table == "/proc/net/tcp" {
				return nil, fmt.Errorf("faultinject: %w", err)
			}
			continue
		}
		lines := strings.Split(string(data), "\n")
		for _, line := range lines[min(1, len(lines)):] {
			f := strings.Fields(line)
			if len(f) < 10 || !inodes[f[9]] {
				continue
			}
			local := f[1]
			colon := strings.LastIndexByte(local, ':')
			if colon < 0 {
				continue
			}
			if p, err := strconv.ParseInt(local[colon+1:], 16, 32); err == nil {
				ports[int(p)] = true
			}
		}
	}
	return ports, nil
}
