package main

import (
	"fmt"
	"os"

	"github.com/dshfs/dshfs/daemon"
	"github.com/dshfs/dshfs/internal/quote"
	"github.com/urfave/cli/v2"
)

// A second mount point of a mounted backing directory shows the same mount
// again: a bind mount of it, served by its daemon, with its history, tools
// and options (one daemon versions a directory; two would each take the
// other's writes for outside changes). Bind mounts need CAP_SYS_ADMIN and
// exist on Linux only: elsewhere, and for a normal user, the second mount
// is refused (daemon.CheckBacking), naming the first.

// mountSecond serves mountpoint as a second mount point of the user's live
// mount of backing, if there is one and this process may; done reports
// that it answered the command (with err).
func mountSecond(c *cli.Context, backing, mountpoint string) (done bool, err error) {
	real, err := daemon.BackingDir(backing)
	if err != nil || !canBind() || daemon.MountedAt(real, realPath(mountpoint)) {
		return false, nil // runMount says what is wrong, or refuses, or waits for an unmount there
	}
	e, ok := daemon.LiveMountOf(real)
	if !ok || e.Err != nil {
		return false, nil
	}
	first := e.MountPoint
	if e.SecondMountPoint() {
		first = e.Record.MountPoint
	}
	if flags := secondMountFlags(c, first); flags != "" {
		return true, cli.Exit(fmt.Sprintf("the backing directory %s is mounted at %s already (pid %d); a second mount point shows that mount with its options, so give it none (%s)",
			quote.Name(real), quote.Name(first), e.Record.Pid, flags), exitUsage)
	}
	mp, err := prepareMountPoint(real, mountpoint, false)
	if err != nil {
		return true, cli.Exit(err.Error(), exitFailure)
	}
	if err := bindMount(first, mp.Path); err != nil {
		mp.Unmake()
		return true, cli.Exit(fmt.Sprintf("show the mount at %s at %s too: %v", quote.Name(first), quote.Name(mp.Path), err), exitFailure)
	}
	sayMade(mp)
	fmt.Printf("dshfs: %s shows the mount of %s at %s (a second mount point, served by its daemon, pid %d; dshfs unmount %s removes this one alone)\n",
		quote.Name(mp.Path), quote.Name(real), quote.Name(first), e.Record.Pid, quote.Name(mp.Path))
	return true, nil
}

// secondMountFlags names the flags given that a second mount point cannot
// honour: any but --allow-other where the first mount has it too.
func secondMountFlags(c *cli.Context, first string) string {
	var bad []string
	for _, name := range c.LocalFlagNames() {
		if name == "allow-other" && allowsOthers(first) {
			continue
		}
		bad = append(bad, "--"+name)
	}
	if len(bad) == 0 {
		return ""
	}
	return fmt.Sprint(bad)
}

// canBind reports whether this process may make bind mounts.
func canBind() bool { return bindSupported && os.Geteuid() == 0 }
