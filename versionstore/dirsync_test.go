package versionstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
)

// recordSyncs records traceSync's events until the test ends.
func recordSyncs(t *testing.T) *[]string {
	var ops []string
	traceSync = func(op, name string) { ops = append(ops, op+" "+name) }
	t.Cleanup(func() { traceSync = nil })
	return &ops
}

// A published name is durable before the write returns: the directory
// that holds it is synced after the link or rename, and a directory the
// publish made is synced into its parent first.
func TestPublishSyncsItsDirectory(t *testing.T) {
	ts := openTestStore(t)
	ops := recordSyncs(t)
	tg := Target{Key: "a/b/f", Display: "/ws/a/b/f"}
	res, err := ts.WriteText(context.Background(), tg, "one\n", Intent{Kind: IntentCreateIfAbsent}, ToolWriter("t"))
	must(t, err)
	want := []string{"sync .", "sync a", "link a/b/f", "sync a/b"}
	if !slices.Equal(*ops, want) {
		t.Fatalf("create: %q, want %q", *ops, want)
	}
	*ops = nil
	_, err = ts.WriteText(context.Background(), tg, "two\n", Intent{Kind: IntentReplaceIfVersion, Version: res.Version}, ToolWriter("t"))
	must(t, err)
	if want := []string{"rename a/b/f", "sync a/b"}; !slices.Equal(*ops, want) {
		t.Fatalf("replace: %q, want %q", *ops, want)
	}
	*ops = nil
	_, err = ts.WriteText(context.Background(), Target{Key: "top", Display: "/ws/top"}, "x\n", Intent{}, ToolWriter("t"))
	must(t, err)
	if want := []string{"rename top", "sync ."}; !slices.Equal(*ops, want) {
		t.Fatalf("top level: %q, want %q", *ops, want)
	}
}

// An object kept in a file is named durably before the index names it: its
// directory is synced after the rename, and the directories made for it
// into their parents.
func TestObjectFileSyncsItsDirectory(t *testing.T) {
	ts := openTestStore(t)
	ops := recordSyncs(t)
	big := make([]byte, 3<<20) // random: compressed, still over inlineLimit
	rand.Read(big)
	v := Sum(big)
	_, err := ts.WriteText(context.Background(), Target{Key: "big", Display: "/ws/big"}, string(big), Intent{}, ToolWriter("t"))
	must(t, err)
	h := hex.EncodeToString(v[:])
	var objs []string
	for _, op := range *ops {
		if strings.Contains(op, " state") {
			objs = append(objs, op)
		}
	}
	want := []string{"sync state", "sync state/objects", "rename state/objects/" + h[:2] + "/" + h[2:], "sync state/objects/" + h[:2]}
	if !slices.Equal(objs, want) {
		t.Fatalf("object file: %q, want %q", objs, want)
	}
}
