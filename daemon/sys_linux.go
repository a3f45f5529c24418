package daemon

import (
	"bufio"
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

// fuseHint names what this machine lacks for a FUSE mount by this user,
// and how to fix it; "" if nothing is missing that dshfs knows of.
func fuseHint(allowOther bool) string {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return "there is no /dev/fuse: load the fuse module (modprobe fuse), or run the container with --device /dev/fuse --cap-add SYS_ADMIN"
	}
	if os.Geteuid() == 0 {
		if !hasCapSysAdmin() {
			return "mounting needs CAP_SYS_ADMIN, which this process lacks: run the container with --cap-add SYS_ADMIN --device /dev/fuse"
		}
		return ""
	}
	if unix.Access("/dev/fuse", unix.R_OK|unix.W_OK) != nil {
		return devFuseHint("/dev/fuse", os.Getuid())
	}
	bin, err := fusermount()
	if err != nil {
		return "a normal user mounts through fusermount3: install fuse3 (Debian, Ubuntu: apt-get install fuse3)"
	}
	if fi, err := os.Stat(bin); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && (fi.Mode()&os.ModeSetuid == 0 || st.Uid != 0) {
			return fmt.Sprintf("%s is not setuid root: as root, run chown root %s && chmod u+s %s", bin, bin, bin)
		}
	}
	if allowOther && !userAllowOther() {
		return "--allow-other needs user_allow_other in /etc/fuse.conf: as root, run echo user_allow_other >> /etc/fuse.conf"
	}
	return ""
}

// userAllowOther reports whether /etc/fuse.conf lets users pass allow_other.
func userAllowOther() bool {
	f, err := os.Open("/etc/fuse.conf")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "user_allow_other" {
			return true
		}
	}
	return false
}

// hasCapSysAdmin reports whether this process may mount (CAP_SYS_ADMIN in
// its effective set).
func hasCapSysAdmin() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return true // cannot tell: say nothing
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err != nil || caps&(1<<unix.CAP_SYS_ADMIN) != 0
		}
	}
	return true
}

// isFuse reports whether st describes a FUSE filesystem.
func isFuse(st *syscall.Statfs_t) bool { return st.Type == 0x65735546 } // FUSE_SUPER_MAGIC

// capFileLimit is the most a soft descriptor limit may be: on Linux, the
// hard limit itself (it is already no more than fs.nr_open).
func capFileLimit(hard uint64) uint64 { return hard }
