package daemon

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Holders lists the processes this user may inspect in /proc that use
// something in the mount at mnt: their working or root directory, their
// program, an open file, a mapped file. The calling process is left out.
// It is advice, read before an unmount: a process may enter the mount just
// after.
func Holders(mnt string) []Holder {
	if idle(mnt) {
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var hs []Holder
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if h, ok := holds(pid, mnt); ok {
			hs = append(hs, h)
		}
	}
	return hs
}

// holds says what, if anything, process pid uses in mnt (the first found).
func holds(pid int, mnt string) (Holder, bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	in := func(p string) bool { return p == mnt || strings.HasPrefix(p, mnt+"/") }
	h := Holder{Pid: pid, Command: command(dir)}
	for _, l := range []struct{ link, uses string }{{"cwd", "working directory"}, {"root", "root directory"}, {"exe", "program"}} {
		if p, err := os.Readlink(filepath.Join(dir, l.link)); err == nil && in(p) {
			h.Uses, h.Path = l.uses, p
			return h, true
		}
	}
	if fds, err := os.ReadDir(filepath.Join(dir, "fd")); err == nil {
		for _, fd := range fds {
			if p, err := os.Readlink(filepath.Join(dir, "fd", fd.Name())); err == nil && in(p) {
				h.Uses, h.Path = "open file", p
				return h, true
			}
		}
	}
	if p, ok := mapped(dir, in); ok {
		h.Uses, h.Path = "mapped file", p
		return h, true
	}
	return h, false
}

// mapped finds a file of the mount the process has mapped.
func mapped(dir string, in func(string) bool) (string, bool) {
	f, err := os.Open(filepath.Join(dir, "maps"))
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// address perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) >= 6 && in(fields[5]) {
			return fields[5], true
		}
	}
	return "", false
}

// command is the process's command name, "?" if it cannot be read.
func command(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "comm"))
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// zombie reports whether pid has exited and waits for its parent to reap
// it: kill(pid, 0) still succeeds then.
func zombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// pid (comm) state …: comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// idle reports whether the kernel says nothing uses the mount at mnt, which
// spares Holders its walk of every process: umount2 with MNT_EXPIRE answers
// EBUSY for a mount in use and otherwise only marks it (EAGAIN), a mark any
// use of the mount clears. Should the mark already be set, the call
// unmounts, which is what the caller is about to have the daemon do. It
// needs CAP_SYS_ADMIN; without it, or on any other answer, the walk decides.
func idle(mnt string) bool {
	err := unix.Unmount(mnt, unix.MNT_EXPIRE)
	return err == nil || errors.Is(err, unix.EAGAIN)
}

// waitExit waits until pid has exited or the deadline passes, and reports
// whether it exited. A pidfd says so the moment it happens; where the
// kernel has none, kill(pid, 0) is asked every 50 ms.
func waitExit(pid int, deadline time.Time) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return pollExit(pid, deadline)
	}
	defer unix.Close(fd)
	for {
		ms := time.Until(deadline).Milliseconds()
		if ms <= 0 {
			return !processAlive(pid)
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(min(ms, 1000)))
		if n > 0 || (err != nil && !errors.Is(err, unix.EINTR)) {
			return !processAlive(pid) || pollExit(pid, deadline)
		}
	}
}
