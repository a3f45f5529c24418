package daemon

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// lockHolders lists the processes holding a flock on path, from
// /proc/locks, which names each lock's file by device and inode.
func lockHolders(path string) []lockHolder {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return nil
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return nil
	}
	defer f.Close()
	file := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	var out []lockHolder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 fd:00:5678 0 EOF"; a waiter's
		// line has "->" after the number, and is no holder.
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[5] != file {
			continue
		}
		if pid, err := strconv.Atoi(fields[4]); err == nil {
			out = append(out, processInfo(pid))
		}
	}
	return out
}

// processInfo is pid's effective uid (-1: unknown) and command name.
func processInfo(pid int) lockHolder {
	h := lockHolder{pid: pid, uid: -1}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil {
		h.comm = strings.TrimSpace(string(b))
	}
	h.exe, _ = os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			if ids := strings.Fields(v); len(ids) > 1 { // real, effective, saved, fs
				if uid, err := strconv.Atoi(ids[1]); err == nil {
					h.uid = uid
				}
			}
		}
	}
	return h
}
