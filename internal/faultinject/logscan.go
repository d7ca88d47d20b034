package faultinject

import (
	"bufio"
	"os"
	"strings"
)

// lockTroubleMarkers are what a relay's log shows when the database broke a lock conflict:
// PostgreSQL's "deadlock detected" (SQLSTATE 40P01), MySQL/MariaDB's "Deadlock found when
// trying to get lock" (error 1213) and "Lock wait timeout exceeded" (error 1205).
var lockTroubleMarkers = []string{"deadlock", "40p01", "error 1213", "lock wait timeout", "error 1205"}

// isLockTrouble reports whether a log line or error message names a deadlock or a lock wait
// timeout.
func isLockTrouble(s string) bool {
	s = strings.ToLower(s)
	for _, m := range lockTroubleMarkers {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// scanLockTrouble counts the lines of the log files that report a deadlock or a lock wait
// timeout, and returns the first few of them.
func scanLockTrouble(paths []string) (count int, samples []string, err error) {
	for _, path := range paths {
		f, err := os.Open(path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return count, samples, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if line := sc.Text(); isLockTrouble(line) {
				count++
				if len(samples) < 3 {
					samples = append(samples, path+": "+line)
				}
			}
		}
		err = sc.Err()
		_ = f.Close()
		if err != nil {
			return count, samples, err
		}
	}
	return count, samples, nil
}
