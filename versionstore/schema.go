package versionstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// The index's schema version says how its buckets, keys and records
// (buckets.go, records.go) are laid out. Every dshfs reads the versions up
// to its own: an older index is upgraded when it is opened, in the
// transaction that opens it, so a crash leaves it as it was or upgraded,
// never half. An index of a newer version is refused, untouched: this
// dshfs could misread it, and what it wrote there the newer one could
// misread. Version 1 is the first layout; an index without a version is of
// it (none written yet).
//
// To change the layout: add a function to upgrades that turns an index of
// the last version into the new one, and keep a kept index of the old
// version in testdata/kept (TestKeptIndex reads it through the upgrade).

// upgrades[i] upgrades an index of schema version i+1 to version i+2.
var upgrades []func(tx *bolt.Tx) error

// schemaVersion is the version this dshfs writes.
func schemaVersion() int { return len(upgrades) + 1 }

// ErrIndexNewer is wrapped by the error that refuses an index written by a
// newer dshfs.
var ErrIndexNewer = errors.New("the index was written by a newer dshfs")

// schemaError refuses an index whose version this dshfs cannot read: a
// newer one, or one that is no version at all.
type schemaError struct {
	found string // as stored
	newer bool
	known int
}

func (e *schemaError) Error() string {
	if !e.newer {
		return fmt.Sprintf("index schema %q is not a version this dshfs knows (it knows schema %d and older)", e.found, e.known)
	}
	return fmt.Sprintf("%v (index schema %s; this dshfs knows schema %d and older)", ErrIndexNewer, e.found, e.known)
}

func (e *schemaError) Unwrap() error {
	if !e.newer {
		return nil
	}
	return ErrIndexNewer
}

// schemaHint is what to do about an index that was refused for its schema.
func schemaHint(indexPath string) string {
	return fmt.Sprintf("it is kept as it is; run a dshfs as new as the one that wrote it, or move the state directory %s aside to start a new history", filepath.Dir(indexPath))
}

// upgradeSchema brings the index in tx to schemaVersion, or refuses it.
func upgradeSchema(tx *bolt.Tx) error {
	found, err := indexSchema(tx)
	if err != nil {
		return err
	}
	for v := found; v < schemaVersion(); v++ {
		if err := upgrades[v-1](tx); err != nil {
			return fmt.Errorf("upgrade index schema %d to %d: %w", v, v+1, err)
		}
	}
	return tx.Bucket(bucketMeta).Put(keySchema, []byte(strconv.Itoa(schemaVersion())))
}

// indexSchema is the schema version of the index in tx: an index without
// one is new (no files bucket yet: this dshfs's) or of version 1.
func indexSchema(tx *bolt.Tx) (int, error) {
	v := tx.Bucket(bucketMeta).Get(keySchema)
	switch {
	case v == nil && tx.Bucket(bucketFiles) == nil:
		return schemaVersion(), nil
	case v == nil:
		return 1, nil
	}
	n, err := strconv.Atoi(string(v))
	if err != nil || n < 1 {
		return 0, &schemaError{found: string(v), known: schemaVersion()}
	}
	if n > schemaVersion() {
		return 0, &schemaError{found: string(v), newer: true, known: schemaVersion()}
	}
	return n, nil
}
