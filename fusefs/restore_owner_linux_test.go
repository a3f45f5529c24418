package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
	"golang.org/x/sys/unix"
)

// Putting root's bytes back never hands them to another user. Root's 0600
// token sits in a directory open to every user's writes (no sticky bit);
// after a checkpoint, the user nobody replaces it through the shared mount
// with a 0644 file of its own. Root's rewind, or restore of the token's version, must then
// either leave nobody's file alone (a conflict) or make the token root's
// 0600 file again: never write the token's bytes into nobody's file, where
// nobody reads them. A token nobody only removed comes back root's 0600.
func TestPutBackKeepsTheBytesOwner(t *testing.T) {
	for _, op := range []string{"rewind", "restore", "recreate"} {
		t.Run(op, func(t *testing.T) {
			m := mountShared(t)
			shared := filepath.Join(m.backing, "shared")
			if err := os.Mkdir(shared, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(shared, 0o777); err != nil {
				t.Fatal(err)
			}
			m.putSecret("shared/token")
			ctx := context.Background()
			if _, err := m.store.Checkpoint(ctx, "cp", nil); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(m.mnt, "shared", "token")
			var err error
			asNobody(t, func() {
				if err = os.Remove(p); err == nil && op != "recreate" {
					err = os.WriteFile(p, []byte("nobody's\n"), 0o644)
				}
			})
			if err != nil {
				t.Fatalf("nobody replaces the token: %v", err)
			}
			if m.waitUnmarked() != 0 {
				t.Fatal("nobody's write is still marked")
			}

			w := versionstore.Writer{Kind: versionstore.WriterRestore, Actor: "root"}
			switch op {
			case "rewind", "recreate":
				res, err := m.store.Rewind(ctx, "cp", versionstore.RewindOptions{Writer: w})
				t.Logf("rewind: %+v, %v", res, err)
			case "restore":
				tg, err := m.store.Resolve("shared/token", "shared/token", "restore")
				if err != nil {
					t.Fatal(err)
				}
				res, err := m.store.Restore(ctx, tg, versionstore.SumString(secret), w)
				t.Logf("restore: %+v, %v", res, err)
			}

			var got []byte
			asNobody(t, func() { got, err = os.ReadFile(p) })
			if err == nil && string(got) == secret {
				t.Fatalf("after root's %s nobody reads the token's bytes through the mount", op)
			}
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(shared, "token"), &st); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(shared, "token"))
			if err != nil {
				t.Fatal(err)
			}
			if string(b) == secret && (st.Uid != 0 || st.Mode&0o7777 != 0o600) {
				t.Fatalf("after root's %s the token's bytes are in a file of uid %d, mode %o", op, st.Uid, st.Mode&0o7777)
			}
			if op == "recreate" && string(b) != secret {
				t.Fatalf("root's rewind did not bring the removed token back: %q", b)
			}
		})
	}
}
