package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dshfs/dshfs/versionstore/remote"
)

// remoteDrainTimeout bounds how long a stopping daemon ships the history
// it has not shipped yet; what is left is said in the log, and shipped by
// the next daemon on the same state directory. With the socket's drain
// (10 s) it stays within what `dshfs unmount` waits (stopTimeout).
const remoteDrainTimeout = 15 * time.Second

// remoteWriterFile holds the name this state directory's daemons
// replicate as: a restarted daemon resumes its own prefix, any other
// dshfs is refused it.
const remoteWriterFile = "remote-writer"

// startRemote starts replicating the history to cfg.Remote, if set; the
// returned function drains it and stops.
func (m *mount) startRemote() (func(), error) {
	if m.cfg.Remote == "" {
		return func() {}, nil
	}
	loc, err := remote.ParseLocation(m.cfg.Remote)
	if err != nil {
		return nil, err
	}
	writer, err := remoteWriter(m.cfg.StateDir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := remote.OpenBucket(ctx, loc)
	if err != nil {
		return nil, err
	}
	r, err := remote.Start(ctx, m.store, b, remote.Options{Writer: writer, Takeover: m.cfg.RemoteTakeover, Logger: m.log, Scrub: true})
	if errors.Is(err, remote.ErrTaken) {
		return nil, fmt.Errorf("%w; --remote-takeover takes it over and stops the other one's replication", err)
	}
	if err != nil && !errors.Is(err, remote.ErrOtherHistory) {
		err = fmt.Errorf("replicate to %s: %w", loc, err)
	}
	if err != nil {
		return nil, err
	}
	m.remote = r
	// Files dshfs has not seen change are in the replica's trees only once
	// the index knows their versions and the store keeps their bytes.
	m.cfg.Baseline = true
	m.log.Info("replicating the history", "remote", loc.String(), "writer", writer)
	return func() {
		if err := r.Close(remoteDrainTimeout); err != nil {
			m.log.Warn("history not all shipped", "err", err)
		}
	}, nil
}

// remoteWriter is the state directory's writer name, made the first time.
func remoteWriter(stateDir string) (string, error) {
	p := filepath.Join(stateDir, remoteWriterFile)
	if b, err := os.ReadFile(p); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return -1
	}, host)
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", err
	}
	name := strings.TrimPrefix(host+"-"+hex.EncodeToString(id[:]), "-")
	if err := writeNew(p, name+"\n"); err != nil {
		return "", fmt.Errorf("record the remote writer: %w", err)
	}
	return name, nil
}
