package versionstore

import (
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The index's layout: every bucket, every key and how keys are encoded
// live in this file; the values' records in records.go; the schema version
// and the upgrades between versions in schema.go.
//
//	meta         "schema" → the schema version (decimal text)
//	             "clean" → the txid of the commit that set it, while the store is closed cleanly (indexopen.go)
//	             "baseline" → when a walk first indexed the whole workspace (RFC 3339), once one has (walk.go)
//	             "salvage" → the last salvage's report, diskSalvage (salvage.go)
//	files        <rel path> → record
//	history      <rel path> 0x00 <seq uint64 BE> → diskHistory; a record's HistFirst and HistNext bound its seqs
//	journal      <seq uint64 BE> → diskJournal; the bucket's sequence numbers the entries
//	checkpoints  <name> → diskCheckpoint
//	objects      <version, 32 bytes> → header and maybe data (objects.go)
//	unkept       <version, 32 bytes> → why its bytes are not kept (1 byte: unkeptCollected, unkeptBudget)
//	unsettled    <rel path> → unsettled: a tool publish not synced yet (settle.go)
//	merges       <step> → mergeIntent: a merge being applied, rolled back at Open if a cut left it (mergeapply.go)
//	observations <actor> 0x00 <rel path> → what the actor last saw there: the version's 32 bytes, or absentMark (observations.go)
//	actors       <actor> → when it last recorded an observation (Unix ns, uint64 BE)
//
// An actor never contains a NUL (recordObservation refuses one), so the
// prefix scan of an actor's observations is exact.
//
// Owners (Owner) are in the history entries, the journal's (PrevOwner) and,
// through the fingerprint, the records. Entries written before dshfs kept
// them have none (nil, or a fingerprint without Owned): the owner is then
// unknown.
var (
	bucketMeta        = []byte("meta")
	bucketFiles       = []byte("files")
	bucketHistory     = []byte("history")
	bucketJournal     = []byte("journal")
	bucketCheckpoints = []byte("checkpoints")
	bucketObjects     = []byte("objects")
	bucketUnkept      = []byte("unkept")
	bucketUnsettled   = []byte("unsettled")
	bucketMerges      = []byte("merges")
	// The policy's, which the store keeps for it.
	bucketObservations = []byte("observations")
	bucketActors       = []byte("actors")

	keySchema   = []byte("schema")
	keyClean    = []byte("clean")
	keyBaseline = []byte("baseline")
	keySalvage  = []byte("salvage")
)

// storeBuckets are the buckets every index has (actors too, made apart:
// initBuckets stamps the actors of an index that had none).
var storeBuckets = [][]byte{bucketMeta, bucketFiles, bucketHistory, bucketObjects, bucketJournal, bucketCheckpoints, bucketUnkept, bucketUnsettled, bucketMerges, bucketObservations}

// jsonBuckets are the buckets whose values are JSON records (records.go):
// a value from a damaged page that does not parse is not salvaged.
var jsonBuckets = map[string]bool{string(bucketFiles): true, string(bucketHistory): true, string(bucketJournal): true, string(bucketCheckpoints): true, string(bucketUnsettled): true, string(bucketMerges): true}

// Why a version's bytes are not kept, in the unkept bucket.
const (
	unkeptCollected byte = 'c'
	unkeptBudget    byte = 'b'
)

func historyKey(path string, seq uint64) []byte {
	k := make([]byte, 0, len(path)+9)
	k = append(k, path...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

func journalKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func observationKey(actor, key string) []byte {
	k := make([]byte, 0, len(actor)+1+len(key))
	return append(append(append(k, actor...), 0), key...)
}

// initBuckets creates the buckets an index lacks, once its schema is
// known to be this dshfs's (upgraded if it was older).
func initBuckets(tx *bolt.Tx) error {
	if _, err := tx.CreateBucketIfNotExists(bucketMeta); err != nil {
		return fmt.Errorf("create bucket %s: %w", bucketMeta, err)
	}
	if err := upgradeSchema(tx); err != nil {
		return err
	}
	for _, name := range storeBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	if tx.Bucket(bucketActors) != nil {
		return nil
	}
	if _, err := tx.CreateBucket(bucketActors); err != nil {
		return fmt.Errorf("create bucket %s: %w", bucketActors, err)
	}
	// An index from before actors were stamped: its actors start their
	// idle time now.
	return stampActors(tx, time.Now())
}
