package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// detachMount detaches a mount lazily: directly as root, through
// fusermount3 as the user who mounted it.
func detachMount(mnt string) error {
	err := unix.Unmount(mnt, unix.MNT_DETACH)
	if !errors.Is(err, unix.EPERM) {
		return err
	}
	bin, lerr := fusermount()
	if lerr != nil {
		return err
	}
	if out, err := exec.Command(bin, "-u", "-z", mnt).CombinedOutput(); err != nil {
		return fmt.Errorf("%s -u -z: %s", bin, strings.TrimSpace(string(out)))
	}
	return nil
}

// fusermount is the setuid helper go-fuse mounts with as a normal user.
func fusermount() (string, error) {
	for _, name := range []string{"fusermount3", "/bin/fusermount3", "fusermount", "/bin/fusermount"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no fusermount3")
}

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
