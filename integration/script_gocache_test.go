package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/rogpeppe/go-internal/testscript"
)

// A script that builds dshfs as another user, in a $HOME of its own, gets
// what that user's go command would otherwise fetch or compile: the
// modules, as a proxy directory (GOPROXY=file://DIR) that go downloads from
// and checks against go.sum as it would from proxy.golang.org, and the
// standard library, compiled, in the user's own build cache. dshfs and its
// modules are still compiled by the user. Both are copied from this user's
// caches, which the other cannot read.

// modproxyCmd, `modproxy DIR`, lays out in DIR, as a module proxy, the
// go.mod file of every module in the checkout's build list that this user's
// go command has (with graph pruning, go reads no go.mod of a module the
// build does not reach: `go mod download` leaves some out) and the zip and
// go.mod of every module cmd/dshfs is built from.
func modproxyCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: modproxy DIR")
	}
	dst := ts.MkAbs(args[0])
	cache := filepath.Join(goOutput(ts, "env", "GOMODCACHE")[0], "cache", "download")
	graph := goOutput(ts, "list", "-m", "-f", "{{if .Version}}{{.Path}}@{{.Version}}{{end}}", "all")
	built := goOutput(ts, "list", "-deps", "-f", "{{with .Module}}{{if .Version}}{{.Path}}@{{.Version}}{{end}}{{end}}", "./cmd/dshfs")
	exts := map[string][]string{}
	for _, m := range graph {
		exts[m] = []string{".mod", ".info"}
	}
	for _, m := range built {
		exts[m] = []string{".mod", ".info", ".zip"}
	}
	for m, want := range exts {
		path, version, _ := strings.Cut(m, "@")
		rel := filepath.Join(escapeModule(path), "@v", escapeModule(version))
		for _, ext := range want {
			err := copyFile(filepath.Join(cache, rel+ext), filepath.Join(dst, rel+ext))
			optional := ext == ".info" || len(want) == 2
			if err != nil && (!optional || !os.IsNotExist(err)) {
				ts.Fatalf("modproxy: %v (go mod download fills the module cache)", err)
			}
		}
	}
}

// stdcacheCmd, `stdcache DIR`, puts in DIR, a build cache, the compiled
// packages of the standard library that cmd/dshfs imports: each package's
// action entry (NAME-a, which a build looks up) and its output (NAME-d).
// They are the entries the go command of another user finds there for the
// same packages, since a package in GOROOT is compiled the same wherever
// the build runs. It prints the packages' import paths.
func stdcacheCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: stdcache DIR")
	}
	dst := ts.MkAbs(args[0])
	std := goOutput(ts, "list", "-deps", "-f", "{{if .Standard}}{{.ImportPath}}{{end}}", "./cmd/dshfs")
	built := goOutput(ts, append([]string{"list", "-export", "-f", "{{if .Export}}{{.BuildID}} {{.Export}}{{end}}"}, std...)...)
	for _, line := range built {
		buildID, export, _ := strings.Cut(line, " ")
		entry, err := actionEntry(buildID, export)
		ts.Check(err)
		for _, f := range []string{entry, export} {
			ts.Check(copyFile(f, filepath.Join(dst, filepath.Base(filepath.Dir(f)), filepath.Base(f))))
		}
	}
	fmt.Fprintln(ts.Stdout(), strings.Join(std, "\n"))
}

// actionEntry finds in the build cache holding export (OUTPUTID-d) the
// action entry that names it. A build ID starts with the action ID's first
// 15 bytes in the go command's base64; the entry's name is its whole hex.
func actionEntry(buildID, export string) (string, error) {
	const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	actionID, _, _ := strings.Cut(buildID, "/")
	if len(actionID) != 20 {
		return "", fmt.Errorf("read build ID %q: not ACTION/CONTENT", buildID)
	}
	prefix := make([]byte, 0, 15)
	for i := 0; i < 20; i += 4 {
		var v int
		for _, c := range actionID[i : i+4] {
			v = v<<6 | strings.IndexRune(b64, c)
		}
		prefix = append(prefix, byte(v>>16), byte(v>>8), byte(v))
	}
	hexID := fmt.Sprintf("%x", prefix)
	output := strings.TrimSuffix(filepath.Base(export), "-d")
	cands, _ := filepath.Glob(filepath.Join(filepath.Dir(filepath.Dir(export)), hexID[:2], hexID+"*-a"))
	for _, c := range cands {
		if b, err := os.ReadFile(c); err == nil && strings.Contains(string(b), " "+output+" ") {
			return c, nil
		}
	}
	return "", fmt.Errorf("find the action entry of %s (build ID %s)", export, buildID)
}

// goOutput runs the go command in the checkout and returns the lines it
// printed, but empty ones.
func goOutput(ts *testscript.TestScript, args ...string) []string {
	cmd := exec.Command("go", args...)
	cmd.Dir = ts.Getenv("REPO")
	out, err := cmd.Output()
	if err != nil {
		ts.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// escapeModule is a module path or version as the module cache and proxies
// spell it: each capital letter as '!' and the letter in lower case.
func escapeModule(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// copyFile copies src to dst, making dst's directories, readable by all.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
