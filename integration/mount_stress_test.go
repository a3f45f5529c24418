package integration

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshfs/dshfs/toolapi"
	"github.com/dshfs/dshfs/versionstore"
)

// stressDuration is how long TestConcurrentShellAndTools hammers the mount:
// a few seconds by default, DSHFS_STRESS (e.g. 30s, as `make stress` sets).
func stressDuration(t *testing.T) time.Duration {
	if s := os.Getenv("DSHFS_STRESS"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("DSHFS_STRESS: %v", err)
		}
		return d
	}
	return 3 * time.Second
}

var validLine = regexp.MustCompile(`^(tool \d+|sh\d+ \d+ [a-z]{40})$`)

// Shell writers and tool actors hammer the same files. Afterwards every
// successful tool edit was applied to exactly the version its actor read,
// the index version of every file is the hash of its bytes, and no file
// holds a torn line.
func TestConcurrentShellAndTools(t *testing.T) {
	w := mountWorkspace(t)
	files := []string{"a.txt", "b.txt", "c.txt"}
	for _, f := range files {
		w.sh("printf 'tool 0\\n' > " + f)
	}
	// The tools go on past the duration until an edit has landed (a loaded
	// machine can refuse every one of a short run's as stale), for a minute
	// at most; the shells until the tools stop.
	deadline := time.Now().Add(stressDuration(t))
	hardStop := deadline.Add(time.Minute)
	var mu sync.Mutex
	edits, stale := 0, 0
	enough := func() bool {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		return now.After(deadline) && edits > 0 || now.After(hardStop)
	}
	var wg, tools sync.WaitGroup

	// Shell writers: appends of whole lines, and whole-file rewrites; one
	// shell a file, pausing now and then so that some tool edits land (a
	// tool edit is refused while its file is being written). (Two shells on one file would tear lines without dshfs
	// too: a rewrite truncates, then writes from offset 0, and an append by
	// another process landing in between is overwritten but for its tail.
	// With kernel passthrough appends are fast enough to land there.)
	for id, f := range files {
		script := fmt.Sprintf(`i=0; while [ ! -e .stop ]; do i=$((i+1)); for f in %s; do
			printf 'sh%d %%d %s\n' $i >> $f
			if [ $((i %% 7)) -eq 0 ]; then printf 'tool 0\nsh%d %%d %s\n' $i > $f; fi
		done; if [ $((i %% 5)) -eq 0 ]; then sleep 0.02; fi; done`, f, id, strings.Repeat("q", 40), id, strings.Repeat("r", 40))
		// The shells stop at a marker file, never mid-write: a killed
		// `printf > f` would leave a truncated file that is not torn.
		cmd := inDir(w.mnt, "sh", "-c", script)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := cmd.Wait(); err != nil {
				t.Errorf("shell writer: %v", err)
			}
		})
	}

	// Tool actors: read, then bump the tool line at the version read.
	for a := range 3 {
		actor := fmt.Sprintf("actor-%d", a)
		tools.Go(func() {
			for i := 0; !enough(); i++ {
				f := files[(a+i)%len(files)]
				rr := w.call(actor, toolapi.ToolRead, map[string]any{"file_path": w.path(f)})
				if rr.IsError {
					continue // caught between truncate and write, or mid-rename
				}
				rv := rr.Value.(toolapi.ReadValue)
				var text strings.Builder
				tool := ""
				for _, l := range rv.Lines {
					text.WriteString(l.Text + "\n")
					if strings.HasPrefix(l.Text, "tool ") {
						tool = l.Text
					}
				}
				if tool == "" || versionstore.SumString(text.String()) != rv.Version {
					continue // the read raced a rewrite; its version is still the bytes it saw
				}
				var n int
				fmt.Sscanf(tool, "tool %d", &n)
				er := w.edit(actor, f, tool, fmt.Sprintf("tool %d", n+1))
				mu.Lock()
				switch {
				case !er.IsError:
					edits++
					if before := er.Value.(toolapi.EditValue).Previous; before != versionstore.SumString(text.String()) {
						t.Errorf("edit by %s applied to version %s, but it read %q", actor, before, text.String())
					}
				case er.Error.Code == string(versionstore.CodeStaleVersion):
					stale++
				default:
					t.Errorf("edit by %s: %s", actor, er.Text)
				}
				mu.Unlock()
			}
		})
	}
	tools.Wait()
	os.WriteFile(w.path(".stop"), nil, 0o644)
	wg.Wait()
	t.Logf("%d tool edits landed, %d refused as stale", edits, stale)
	if edits == 0 {
		t.Fatal("no tool edit landed: the test exercised nothing")
	}

	// Releases are asynchronous: give the last commits a moment.
	for _, f := range files {
		b, err := os.ReadFile(w.backing + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.indexVersionBecomes(f, versionstore.Sum(b)); got != versionstore.Sum(b) {
			t.Errorf("%s: index %s, bytes %s", f, got.Short(), versionstore.Sum(b).Short())
		}
		for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if !validLine.MatchString(line) {
				t.Errorf("%s line %d is torn: %q", f, i+1, line)
			}
		}
	}
}
