package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dshfs/dshfs/internal/quote"
	"github.com/dshfs/dshfs/toolapi"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/dshfs/dshfs/versionstore/remote"
	"github.com/urfave/cli/v2"
)

// remoteFlag makes log, diff, show and checkpoints read a replicated
// history from its bucket alone: no mount, no local state.
var remoteFlag = &cli.StringFlag{Name: "remote",
	Usage: "read the history from s3://BUCKET/PREFIX (as `dshfs mount --remote` replicates it) instead of a running mount; the AWS configuration (AWS_ENDPOINT_URL_S3, AWS_PROFILE, ...) says where and as whom"}

// replica is a history fetched from a bucket into a temporary store, read
// by the same code that answers for a running mount.
type replica struct {
	dir   string
	hist  *remote.History
	store *versionstore.Store
	svc   *toolapi.Service
}

// openReplica fetches the history at url, every object checked against its
// version; damaged ones are named on standard error and left out.
func openReplica(ctx context.Context, url string) (*replica, error) {
	loc, err := remote.ParseLocation(url)
	if err != nil {
		return nil, cli.Exit(err.Error()+"; give --remote s3://BUCKET/PREFIX", exitUsage)
	}
	hist, objs, err := fetchReplica(ctx, loc)
	if err != nil {
		return nil, err
	}
	r := &replica{hist: hist}
	if r.dir, err = os.MkdirTemp("", "dshfs-remote-"); err != nil {
		return nil, err
	}
	ws := filepath.Join(r.dir, "workspace")
	if err = os.Mkdir(ws, 0o700); err == nil {
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		r.store, err = versionstore.Open(ws, filepath.Join(r.dir, "index.db"), versionstore.Options{Logger: quiet})
	}
	if err == nil {
		err = r.store.ImportHistory(hist.Entries, hist.Checkpoints, objs)
	}
	if err == nil {
		r.svc, err = toolapi.New(r.store, nil, toolapi.Config{MountPoint: ws})
	}
	if err != nil {
		r.Close()
		return nil, cli.Exit(fmt.Sprintf("cannot read the history of %s: %v", loc, err), exitFailure)
	}
	return r, nil
}

// fetchReplica reads the history and its objects from the bucket.
func fetchReplica(ctx context.Context, loc remote.Location) (*remote.History, map[versionstore.Version][]byte, error) {
	b, err := remote.OpenBucket(ctx, loc)
	if err == nil {
		var hist *remote.History
		if hist, err = remote.Fetch(ctx, b); err == nil {
			objs, damaged, err := hist.Objects(ctx)
			for _, d := range damaged {
				fmt.Fprintf(os.Stderr, "dshfs: a remote object failed its check and is left out: %v\n", d)
			}
			if err == nil {
				return hist, objs, nil
			}
		}
	}
	if errors.Is(err, remote.ErrNoHistory) {
		return nil, nil, cli.Exit(fmt.Sprintf("%s holds no dshfs history; check the bucket and prefix", loc), exitNotFound)
	}
	return nil, nil, cli.Exit(fmt.Sprintf("cannot read the history at %s: %v; check AWS_ENDPOINT_URL_S3 and the credentials", loc, err), exitUnreachable)
}

// Close removes the temporary store.
func (r *replica) Close() {
	if r.store != nil {
		r.store.Close()
	}
	os.RemoveAll(r.dir)
}

// runRemoteLog prints the changes of a replicated history as log prints a
// mount's.
func runRemoteLog(c *cli.Context, o logOptions, paths []string) error {
	r, err := openReplica(c.Context, o.Remote)
	if err != nil {
		return err
	}
	defer r.Close()
	if len(paths) == 1 && o.Since == "" {
		path := strings.TrimPrefix(filepath.ToSlash(filepath.Clean(paths[0])), "./")
		return printVersions(r.hist.PathHistory(path), paths[0], o)
	}
	o.Paths = paths
	return runChanges(c.Context, func(ctx context.Context, q toolapi.SessionQuery) ([]versionstore.Change, error) {
		return r.svc.Log(ctx, q)
	}, o)
}

// runRemoteDiff prints one diff of the replicated history's changes q
// selects.
func runRemoteDiff(c *cli.Context, url string, q toolapi.SessionQuery) error {
	r, err := openReplica(c.Context, url)
	if err != nil {
		return err
	}
	defer r.Close()
	var out bytes.Buffer
	if err := r.svc.SessionDiff(c.Context, &out, q, 0); err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	_, err = os.Stdout.Write(out.Bytes())
	return err
}

// runRemoteCheckpoints lists a replicated history's checkpoints.
func runRemoteCheckpoints(c *cli.Context, url string, asJSON bool) error {
	loc, err := remote.ParseLocation(url)
	if err != nil {
		return cli.Exit(err.Error()+"; give --remote s3://BUCKET/PREFIX", exitUsage)
	}
	b, err := remote.OpenBucket(c.Context, loc)
	if err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	hist, err := remote.Fetch(c.Context, b)
	if err != nil {
		return cli.Exit(fmt.Sprintf("cannot read the history at %s: %v; check AWS_ENDPOINT_URL_S3 and the credentials", loc, err), exitUnreachable)
	}
	if asJSON {
		return printJSON(hist.Checkpoints)
	}
	return printCheckpoints(os.Stdout, hist.Checkpoints)
}

// runRemoteShow prints the bytes of path at version, fetched from the
// bucket and checked against the version. A short version is looked up
// among the versions the journal gives path.
func runRemoteShow(c *cli.Context, url, path, version string) error {
	r, err := openReplica(c.Context, url)
	if err != nil {
		return err
	}
	defer r.Close()
	v, err := remoteVersion(r.hist, strings.TrimPrefix(filepath.ToSlash(path), "./"), version)
	if err != nil {
		return cli.Exit(err.Error(), exitNotFound)
	}
	data, err := r.hist.Object(c.Context, v)
	if err != nil {
		return cli.Exit(fmt.Sprintf("cannot show %s@%s: %v", quote.Name(path), v.Short(), err), exitNotFound)
	}
	_, err = os.Stdout.Write(data)
	return err
}

// remoteVersion finds the version arg names among those of path.
func remoteVersion(h *remote.History, path, arg string) (versionstore.Version, error) {
	if v, err := versionstore.ParseVersion(arg); err == nil && !v.IsZero() {
		return v, nil
	}
	prefix := strings.ToLower(strings.TrimPrefix(arg, "b3:"))
	found := map[versionstore.Version]bool{}
	for _, e := range h.Entries {
		if e.Path != path {
			continue
		}
		for _, v := range []versionstore.Version{e.Prev, e.Version} {
			if !v.IsZero() && strings.HasPrefix(hex.EncodeToString(v[:]), prefix) {
				found[v] = true
			}
		}
	}
	for v := range found {
		if len(found) == 1 {
			return v, nil
		}
		return versionstore.Version{}, fmt.Errorf("version %s is ambiguous in the history of %s: %d versions start with it", arg, quote.Name(path), len(found))
	}
	return versionstore.Version{}, fmt.Errorf("no version %s in the history of %s", arg, quote.Name(path))
}

// remoteFlagTo is remoteFlag with its value going to dst.
func remoteFlagTo(dst *string) cli.Flag {
	f := *remoteFlag
	f.Destination = dst
	return &f
}

// remoteText is a mount's replica in status: where, how far, how late, and
// what fails.
func remoteText(mnt string, r *remote.Status) string {
	s := fmt.Sprintf("%s: history replicated to %s, journal shipped through entry %d of %d", quote.Name(mnt), r.Remote, r.ShippedSeq, r.LocalSeq)
	if r.Lag > 0 {
		s += fmt.Sprintf(", %s behind", r.Lag.Round(time.Millisecond))
	}
	if n := len(r.Damaged); n > 0 {
		s += fmt.Sprintf("; %d objects in the bucket are damaged and no longer kept here to send again (%s)", n, quote.Text(strings.Join(r.Damaged, ", ")))
	}
	switch {
	case r.Fenced:
		s += "; stopped: " + quote.Text(r.Error)
	case r.Error != "":
		s += fmt.Sprintf("; remote unreachable since %s: %s", r.ErrorSince.Local().Format(time.DateTime), quote.Text(r.Error))
	}
	return s
}
