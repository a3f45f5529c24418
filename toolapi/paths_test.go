package toolapi

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
)

// verbCall runs the tool of verb on path as agent, with a given cwd, in a
// form where only a confined resolution can succeed.
func (h *harness) verbCall(verb, cwd, path string) Result {
	h.t.Helper()
	switch verb {
	case "read":
		return h.callIn(ToolRead, agent, cwd, map[string]any{"file_path": path})
	case "write":
		return h.callIn(ToolWrite, agent, cwd, map[string]any{"file_path": path, "content": "pwned\n"})
	case "edit":
		return h.callIn(ToolEdit, agent, cwd, map[string]any{"file_path": path, "old_string": "secret", "new_string": "pwned"})
	}
	h.t.Fatalf("unknown verb %q", verb)
	return Result{}
}

var verbs = []string{"read", "write", "edit"}

func mkdir(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultCwdIsMountPoint(t *testing.T) {
	h := newHarness(t)
	mustText(t, h.write(agent, "f.txt", "x"), fileBlock(h.disp("f.txt"), "Created file"))
	if got := h.get("f.txt"); got != "x" {
		t.Fatalf("content = %q", got)
	}
	// The mount point is only a name: nothing was created there.
	mustNotExist(t, h.mount)
	// Every display path is under the mount point.
	r := h.read(agent, "f.txt")
	if v := r.Value.(ReadValue); v.Path != filepath.Join(h.mount, "f.txt") {
		t.Fatalf("read value path %q", v.Path)
	}
	mustText(t, h.edit(agent, "f.txt", "x", "y"), "The file "+h.disp("f.txt")+" has been updated successfully.")
}

func TestRelativePathResolvesAgainstCwd(t *testing.T) {
	h := newHarness(t)
	mkdir(t, h.backing("sub/deeper"))
	for _, cwd := range []string{h.disp("sub"), h.backing("sub"), h.disp("sub") + "/", h.disp("sub/deeper") + "/.."} {
		t.Run(cwd, func(t *testing.T) {
			h := h.in(t)
			mustText(t, h.callIn(ToolWrite, "cwd "+cwd, cwd, map[string]any{"file_path": "f.txt", "content": cwd}),
				fileBlock(h.disp("sub/f.txt"), "Created file"))
			if got := h.get("sub/f.txt"); got != cwd {
				t.Fatalf("content = %q", got)
			}
			mustNotExist(t, h.backing("f.txt"))
			if err := os.Remove(h.backing("sub/f.txt")); err != nil {
				t.Fatal(err)
			}
		})
	}
	// An absolute file_path ignores the cwd.
	mustText(t, h.callIn(ToolWrite, agent, h.disp("sub"), map[string]any{"file_path": h.disp("top.txt"), "content": "t"}),
		fileBlock(h.disp("top.txt"), "Created file"))
	// A cwd that is a directory not yet created is still a base.
	mustText(t, h.callIn(ToolWrite, agent, h.disp("later"), map[string]any{"file_path": "f.txt", "content": "l"}),
		fileBlock(h.disp("later/f.txt"), "Created file"))
}

func TestAbsolutePathNames(t *testing.T) {
	h := newHarness(t)
	h.put("dir/f.txt", "hello\n")
	// The backing directory's name and the mount point's name both work,
	// and both display under the mount point.
	for _, p := range []string{h.backing("dir/f.txt"), h.disp("dir/f.txt"), h.disp("dir/./f.txt"), h.disp("dir//f.txt"), h.disp("dir/f.txt/")} {
		mustText(t, h.read(agent, p), fileBlock(h.disp("dir/f.txt"), "1: hello\n\n(End of file - total 1 lines)"))
	}
	mustText(t, h.write(agent, h.backing("dir/f.txt"), "bye\n"), fileBlock(h.disp("dir/f.txt"), "Updated file"))
	mustText(t, h.edit(agent, h.backing("dir/f.txt"), "bye", "ciao"), "The file "+h.disp("dir/f.txt")+" has been updated successfully.")
	if got := h.get("dir/f.txt"); got != "ciao\n" {
		t.Fatalf("content = %q", got)
	}
}

func TestNamesAreLiteral(t *testing.T) {
	h := newHarness(t)
	// Whitespace inside a name is kept, and "~" is not expanded.
	mustText(t, h.write(agent, " a.txt ", "spaces"), fileBlock(h.disp(" a.txt "), "Created file"))
	mustText(t, h.write(agent, "~/a.txt", "tilde"), fileBlock(h.disp("~/a.txt"), "Created file"))
	if h.get(" a.txt ") != "spaces" || h.get("~/a.txt") != "tilde" {
		t.Fatal("names were not taken literally")
	}
	// ".." that stays inside the workspace is fine, lexically.
	mustText(t, h.read(agent, "../mnt/ a.txt "), fileBlock(h.disp(" a.txt "), "1: spaces\n\n(End of file - total 1 lines)"))
}

func TestDotDotOutsideWorkspace(t *testing.T) {
	for _, verb := range verbs {
		t.Run(verb, func(t *testing.T) {
			h := newHarness(t)
			// "../x" from the mount point names a sibling of the mount point.
			above := filepath.Join(filepath.Dir(h.mount), "x")
			putFile(t, above, "secret\n")
			nearWS := filepath.Join(filepath.Dir(h.ws), "x")
			mustFail(t, h.verbCall(verb, "", "../x"), versionstore.CodeSandboxDenied,
				`cannot `+verb+` "`+above+`": outside the workspace`)
			if got := getFile(t, above); got != "secret\n" {
				t.Fatalf("outside file changed to %q", got)
			}
			mustNotExist(t, nearWS)
			// Deeper escapes, and from a cwd below the root.
			mkdir(t, h.backing("sub"))
			far := filepath.Join(filepath.Dir(h.mount), "y")
			mustFail(t, h.verbCall(verb, h.disp("sub"), "../../y"), versionstore.CodeSandboxDenied,
				`cannot `+verb+` "`+far+`": outside the workspace`)
			mustNotExist(t, far)
			mustNotExist(t, filepath.Join(filepath.Dir(h.ws), "y"))
			if entries, _ := os.ReadDir(h.ws); len(entries) != 1 {
				t.Fatalf("workspace holds %d entries, want only sub/", len(entries))
			}
		})
	}
}

func TestAbsolutePathOutsideWorkspace(t *testing.T) {
	for _, verb := range verbs {
		t.Run(verb, func(t *testing.T) {
			h := newHarness(t)
			outside := t.TempDir()
			secret := filepath.Join(outside, "secret.txt")
			putFile(t, secret, "secret\n")
			mustFail(t, h.verbCall(verb, "", secret), versionstore.CodeSandboxDenied,
				`cannot `+verb+` "`+secret+`": outside the workspace`)
			if got := getFile(t, secret); got != "secret\n" {
				t.Fatalf("outside file changed to %q", got)
			}
			fresh := filepath.Join(outside, "new", "fresh.txt")
			mustFail(t, h.verbCall(verb, "", fresh), versionstore.CodeSandboxDenied,
				`cannot `+verb+` "`+fresh+`": outside the workspace`)
			mustNotExist(t, filepath.Join(outside, "new"))
			// The parent of the workspace is outside too.
			mustFail(t, h.verbCall(verb, "", filepath.Dir(h.ws)+"/z.txt"), versionstore.CodeSandboxDenied,
				`cannot `+verb+` "`+filepath.Dir(h.ws)+`/z.txt": outside the workspace`)
			mustNotExist(t, filepath.Join(filepath.Dir(h.ws), "z.txt"))
		})
	}
}

func TestSymlinkOutsideWorkspace(t *testing.T) {
	for _, verb := range verbs {
		t.Run(verb, func(t *testing.T) {
			h := newHarness(t)
			outside := t.TempDir()
			secret := filepath.Join(outside, "secret.txt")
			putFile(t, secret, "secret\n")
			rel, err := filepath.Rel(h.ws, secret)
			if err != nil {
				t.Fatal(err)
			}
			relDir, err := filepath.Rel(h.backing("sub"), outside)
			if err != nil {
				t.Fatal(err)
			}
			mkdir(t, h.backing("sub"))
			symlink(t, secret, h.backing("abs-link"))            // absolute, to a file
			symlink(t, rel, h.backing("rel-link"))               // relative, to a file
			symlink(t, outside, h.backing("abs-dir"))            // absolute, to a directory
			symlink(t, relDir, h.backing("sub/rel-dir"))         // relative, to a directory, from below the root
			symlink(t, "../../x", h.backing("sub/dangling-out")) // relative, dangling, outside
			for _, p := range []string{"abs-link", "rel-link", "abs-dir/secret.txt", "sub/rel-dir/secret.txt",
				"abs-dir/new.txt", "sub/rel-dir/new.txt", "sub/dangling-out"} {
				mustFail(t, h.verbCall(verb, "", p), versionstore.CodeSandboxDenied,
					`cannot `+verb+` "`+h.disp(p)+`": outside the workspace`)
			}
			if got := getFile(t, secret); got != "secret\n" {
				t.Fatalf("outside file changed to %q", got)
			}
			mustNotExist(t, filepath.Join(outside, "new.txt"))
			mustNotExist(t, filepath.Join(filepath.Dir(h.ws), "x"))
			for _, l := range []string{"abs-link", "rel-link", "abs-dir", "sub/rel-dir", "sub/dangling-out"} {
				if fi, err := os.Lstat(h.backing(l)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
					t.Fatalf("%s is no longer a symlink (%v)", l, err)
				}
			}
		})
	}
}

func TestSymlinkInsideWorkspace(t *testing.T) {
	h := newHarness(t)
	h.put("real.txt", "one\n")
	symlink(t, "real.txt", h.backing("link.txt"))
	symlink(t, h.backing("real.txt"), h.backing("abs-link.txt"))
	symlink(t, h.disp("real.txt"), h.backing("mnt-link.txt")) // through the mount point's name

	// Every alias reads the same file, displayed by the name used.
	v := versionstore.SumString("one\n")
	for _, name := range []string{"link.txt", "abs-link.txt", "mnt-link.txt"} {
		r := h.read(agent, name)
		mustText(t, r, fileBlock(h.disp(name), "1: one\n\n(End of file - total 1 lines)"))
		if got := readVersion(t, r); got != v {
			t.Fatalf("version via %s = %s, want %s", name, got, v)
		}
	}

	// A write through the link rewrites the target and keeps the link.
	mustText(t, h.write(agent, "link.txt", "two\n"), fileBlock(h.disp("link.txt"), "Updated file"))
	if got := h.get("real.txt"); got != "two\n" {
		t.Fatalf("target content = %q", got)
	}
	if target, err := os.Readlink(h.backing("link.txt")); err != nil || target != "real.txt" {
		t.Fatalf("link.txt is %q, %v; want a symlink to real.txt", target, err)
	}

	// Aliases share observations: read via the link, edit via the real
	// name, then via another alias, with no read in between.
	mustOK(t, h.read("other", "link.txt"))
	mustText(t, h.edit("other", "real.txt", "two", "three"), "The file "+h.disp("real.txt")+" has been updated successfully.")
	mustOK(t, h.edit("other", "abs-link.txt", "three", "four"))
	mustOK(t, h.write("other", "mnt-link.txt", "five\n"))
	if got := h.get("real.txt"); got != "five\n" {
		t.Fatalf("target content = %q", got)
	}
	for _, l := range []string{"link.txt", "abs-link.txt", "mnt-link.txt"} {
		if fi, err := os.Lstat(h.backing(l)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("%s is no longer a symlink (%v)", l, err)
		}
	}

	// Staleness is detected across aliases.
	mustOK(t, h.read("third", "real.txt"))
	h.put("real.txt", "changed\n")
	mustFail(t, h.edit("third", "link.txt", "changed", "x"), versionstore.CodeStaleVersion,
		`cannot edit "`+h.disp("link.txt")+`": file changed since it was read`+reRead)
}

func TestSymlinkedDirectoryInsideWorkspace(t *testing.T) {
	h := newHarness(t)
	mkdir(t, h.backing("real"))
	symlink(t, "real", h.backing("dl"))
	mustText(t, h.write(agent, "dl/new.txt", "n"), fileBlock(h.disp("dl/new.txt"), "Created file"))
	if got := h.get("real/new.txt"); got != "n" {
		t.Fatalf("content = %q", got)
	}
	if fi, err := os.Lstat(h.backing("dl")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("dl is no longer a symlink (%v)", err)
	}
	// The write's observation holds for the real name too.
	mustOK(t, h.edit(agent, "real/new.txt", "n", "m"))
	// A missing file under the link: the absence is recorded for the real path.
	mustFail(t, h.read(agent, "dl/absent.txt"), versionstore.CodeNotFound, `cannot read "`+h.disp("dl/absent.txt")+`": not found`)
	mustFail(t, h.edit(agent, "real/absent.txt", "a", "b"), versionstore.CodeNotFound, `cannot edit "`+h.disp("real/absent.txt")+`": not found`)
}

func TestDanglingSymlinkInsideWorkspace(t *testing.T) {
	h := newHarness(t)
	symlink(t, "missing.txt", h.backing("dangling"))
	mustFail(t, h.read(agent, "dangling"), versionstore.CodeNotFound, `cannot read "`+h.disp("dangling")+`": not found`)
	mustFail(t, h.write(agent, "dangling", "x"), versionstore.CodeNotRegularFile, `cannot write "`+h.disp("dangling")+`": not a regular file`)
	if target, err := os.Readlink(h.backing("dangling")); err != nil || target != "missing.txt" {
		t.Fatalf("dangling is %q, %v; want the link preserved", target, err)
	}
	mustNotExist(t, h.backing("missing.txt"))
}

// The reference implementation canonicalises the session cwd when ".." is
// involved, so "../x" from a symlinked directory means what the shell means.
func TestSessionCwdCanonicalisation(t *testing.T) {
	h := newHarness(t)
	mkdir(t, h.backing("proj/sub"))
	symlink(t, "proj/sub", h.backing("alias"))
	symlink(t, h.backing("proj/sub"), h.backing("abs-alias"))
	for _, cwd := range []string{h.disp("alias"), h.disp("abs-alias"), h.backing("alias")} {
		t.Run(cwd, func(t *testing.T) {
			h := h.in(t)
			mustText(t, h.callIn(ToolWrite, "a "+cwd, cwd, map[string]any{"file_path": "../x.txt", "content": "up"}),
				fileBlock(h.disp("proj/x.txt"), "Created file"))
			if got := h.get("proj/x.txt"); got != "up" {
				t.Fatalf("content = %q", got)
			}
			mustNotExist(t, h.backing("x.txt"))
			if err := os.Remove(h.backing("proj/x.txt")); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Without "..", the cwd is used as given: displayed through the alias.
	mustText(t, h.callIn(ToolWrite, agent, h.disp("alias"), map[string]any{"file_path": "y.txt", "content": "here"}),
		fileBlock(h.disp("alias/y.txt"), "Created file"))
	if got := h.get("proj/sub/y.txt"); got != "here" {
		t.Fatalf("content = %q", got)
	}
	// Canonicalising never lets ".." climb out of the workspace.
	mustFail(t, h.callIn(ToolRead, agent, h.disp("alias"), map[string]any{"file_path": "../../../x"}), versionstore.CodeSandboxDenied,
		`cannot read "`+filepath.Join(filepath.Dir(h.mount), "x")+`": outside the workspace`)
}

// The reference implementation applies the same rule when the cwd itself has a
// ".." segment (session-cwd.ts tests the cwd; realpath resolves "alias/.." to
// the parent of alias's target). dshfs cleans the cwd lexically in cwdDisplay
// before paths.go:resolve tests it for "..", so the rule never fires for the
// cwd: "alias/.." becomes the root instead of proj/.
func TestSessionCwdWithDotDotIsCanonicalised(t *testing.T) {
	h := newHarness(t)
	mkdir(t, h.backing("proj/sub"))
	symlink(t, "proj/sub", h.backing("alias"))
	mustText(t, h.callIn(ToolWrite, agent, h.disp("alias")+"/..", map[string]any{"file_path": "x.txt", "content": "up"}),
		fileBlock(h.disp("proj/x.txt"), "Created file"))
	if got := h.get("proj/x.txt"); got != "up" {
		t.Fatalf("content = %q", got)
	}
}

func TestCwdMustBeInsideWorkspace(t *testing.T) {
	h := newHarness(t)
	outside := t.TempDir()
	tests := []struct {
		cwd, want string
	}{
		{outside, `cwd "` + outside + `" is outside the workspace`},
		{h.mount + "/../elsewhere", `cwd "` + h.mount + `/../elsewhere" is outside the workspace`},
		{filepath.Dir(h.ws), `cwd "` + filepath.Dir(h.ws) + `" is outside the workspace`},
		{"sub", `cwd "sub" must be an absolute path inside the workspace`},
	}
	for _, tc := range tests {
		for _, verb := range verbs {
			mustFail(t, h.verbCall(verb, tc.cwd, "f.txt"), "", tc.want)
		}
	}
	mustNotExist(t, filepath.Join(outside, "f.txt"))
	mustNotExist(t, h.backing("f.txt"))
	mustNotExist(t, h.backing("sub"))
}

func TestPathWithNULByte(t *testing.T) {
	for _, verb := range verbs {
		t.Run(verb, func(t *testing.T) {
			h := newHarness(t)
			h.put("a", "secret\n")
			mustFail(t, h.verbCall(verb, "", "a\x00b.txt"), versionstore.CodeNotFound,
				`cannot resolve "`+h.disp("a\x00b.txt")+`": the path contains a NUL byte`)
			if entries, _ := os.ReadDir(h.ws); len(entries) != 1 {
				t.Fatalf("workspace holds %d entries, want only the original", len(entries))
			}
			if got := h.get("a"); got != "secret\n" {
				t.Fatalf("content = %q", got)
			}
		})
	}
}

func TestFileAsParentSegment(t *testing.T) {
	for _, verb := range verbs {
		t.Run(verb, func(t *testing.T) {
			h := newHarness(t)
			h.put("file.txt", "secret\n")
			for _, p := range []string{"file.txt/x", "file.txt/a/b"} {
				mustFail(t, h.verbCall(verb, "", p), versionstore.CodeNotFound,
					`cannot resolve "`+h.disp(p)+`": a parent path segment is not a directory`)
			}
			if got := h.get("file.txt"); got != "secret\n" {
				t.Fatalf("content = %q", got)
			}
		})
	}
}
