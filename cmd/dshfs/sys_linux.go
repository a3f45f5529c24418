package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

func detachMount(mnt string) error { return unix.Unmount(mnt, unix.MNT_DETACH) }

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// systemMounts lists every dshfs mount on the machine, whoever runs it,
// from the kernel's mount table: mount point, backing directory (dshfs
// mounts name it as their source) and the uid that mounted it.
func systemMounts() []systemMount {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []systemMount
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint options [optional…] - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 || g[0] != "fuse.dshfs" {
			continue
		}
		m := systemMount{MountPoint: unescapeMount(f[4]), Backing: unescapeMount(g[1]), UID: -1}
		for _, o := range strings.Split(g[2], ",") {
			if v, ok := strings.CutPrefix(o, "user_id="); ok {
				m.UID, _ = strconv.Atoi(v)
			}
		}
		out = append(out, m)
	}
	return out
}

// unescapeMount undoes the kernel's octal escapes (\040 for a space) in a
// mount table field.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// isFuse reports whether st describes a FUSE filesystem.
func isFuse(st *syscall.Statfs_t) bool { return st.Type == 0x65735546 } // FUSE_SUPER_MAGIC

// capFileLimit is the most a soft descriptor limit may be: on Linux, the
// hard limit itself (it is already no more than fs.nr_open).
func capFileLimit(hard uint64) uint64 { return hard }
