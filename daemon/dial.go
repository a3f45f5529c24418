package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	unixsocket "github.com/dshfs/dshfs/unix-socket"
)

// Daemon is a mount's daemon, checked by Dial to be that mount's.
type Daemon struct {
	Entry
	// Client talks to it, and only to it: every connection is checked
	// as Dial's was.
	Client *unixsocket.Client
	// Serves is where it said it serves when it was checked (Client.Mount).
	Serves unixsocket.Status
}

// dialTimeout bounds Dial's check: a daemon that accepts but does not
// answer must not hold a command forever.
const dialTimeout = 5 * time.Second

// Dial checks that the daemon e's record names is e's, before anything is
// sent to it: the socket file belongs to the mount's user, the process
// serving it runs as that user with the record's pid, and it says it
// serves e's mount point (or one the mount table shows to be the same
// mount: e is a second mount point of it). Its errors are ErrUnreachable.
func Dial(ctx context.Context, e Entry) (Daemon, error) {
	if err := e.Reachable(); err != nil {
		return Daemon{}, err
	}
	if e.UID < 0 || e.Record.Pid <= 0 {
		return Daemon{}, unreachable("the dshfs mount at %s does not say which user and process serve it; unmount it and mount it again", e.MountPoint)
	}
	c := unixsocket.NewClientFor(e.Record.Socket, unixsocket.Peer{UID: e.UID, Pid: e.Record.Pid})
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	st, err := c.Mount(ctx)
	switch {
	case errors.Is(err, unixsocket.ErrWrongPeer):
		return Daemon{}, notItsDaemon("the dshfs mount at %s names a daemon that is not its own (%v); dshfs status lists the mounts and their users", e.MountPoint, err)
	case err != nil:
		return Daemon{}, unreachable("cannot reach the daemon of the dshfs mount at %s: %v; dshfs status shows whether it runs", e.MountPoint, err)
	case st.MountPoint != e.MountPoint && !sameMount(e.MountPoint, st.MountPoint):
		c.CloseIdle()
		return Daemon{}, notItsDaemon("the daemon the dshfs mount at %s names serves %s instead; dshfs status lists the mounts", e.MountPoint, st.MountPoint)
	}
	return Daemon{Entry: e, Client: c, Serves: st}, nil
}

func unreachable(format string, a ...any) error {
	return &lookupError{msg: fmt.Sprintf(format, a...), kind: ErrUnreachable}
}

func notItsDaemon(format string, a ...any) error {
	return &lookupError{msg: fmt.Sprintf(format, a...), kind: ErrUnreachable, note: "not the mount's daemon"}
}

// DialNote is what status says of a mount whose daemon Dial refused.
func DialNote(err error) string {
	var le *lookupError
	if errors.As(err, &le) && le.note != "" {
		return le.note
	}
	return "daemon not answering"
}
