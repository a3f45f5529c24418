package versionstore

import (
	"context"
	"os"
	"syscall"
	"testing"
)

// A publish put back after a power cut goes back as its owner's file, never
// into the file that holds the path now: a user who may replace files in
// the directory must not get, by leaving an empty file of theirs there
// before the restart, bytes a tool wrote into root's 0600 file.
func TestLostPublishIsNotPutIntoAnotherUsersFile(t *testing.T) {
	requireRoot(t)
	ts := openTestStore(t)
	must(t, os.Mkdir(ts.path("shared"), 0o755))
	must(t, os.Chown(ts.path("shared"), 65534, 65534)) // nobody's directory
	ts.putAs("shared/token", "old token\n", 0, 0, 0o600)
	v := ts.version("shared/token")
	ts.stopSettling()
	_, err := ts.WriteText(context.Background(), ts.target("shared/token"), "new token\n", Intent{Kind: IntentReplaceIfVersion, Version: v}, ToolWriter("t"))
	must(t, err)
	// The cut; before the daemon is back, nobody replaces the file with an
	// empty one of theirs, as their directory lets them.
	ts.putAs("shared/token", "", 65534, 65534, 0o644)
	ts.restartAfterCut()
	var st syscall.Stat_t
	must(t, syscall.Lstat(ts.path("shared/token"), &st))
	if got := ts.get("shared/token"); got == "new token\n" && st.Uid != 0 {
		t.Fatalf("shared/token holds the tool's bytes as uid %d's file, mode %o, after the restart: root's bytes given to another user", st.Uid, st.Mode&0o7777)
	}
}

// A user's file whose tool publish a power cut lost comes back theirs, with
// its bits.
func TestLostPublishComesBackAsItsOwners(t *testing.T) {
	requireRoot(t)
	ts := openTestStore(t)
	must(t, os.Mkdir(ts.path("home"), 0o755))
	must(t, os.Chown(ts.path("home"), 65534, 65534))
	ts.putAs("home/notes", "before\n", 65534, 65534, 0o640)
	v := ts.version("home/notes")
	ts.stopSettling()
	_, err := ts.WriteText(context.Background(), ts.target("home/notes"), "after\n", Intent{Kind: IntentReplaceIfVersion, Version: v}, ToolWriter("t"))
	must(t, err)
	ts.putAs("home/notes", "before\n", 65534, 65534, 0o640) // the rename lost
	ts.restartAfterCut()
	ts.wantOwner("home/notes", "after\n", 65534, 65534, 0o640)
}
