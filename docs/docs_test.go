// Package docs holds dshfs's documentation beyond the README: one Markdown
// file per topic, linked from README.md. It has no code; its test keeps the
// README a front door (small enough to read through) and every relative link
// of the README and of docs/*.md pointing at a file and heading that exist,
// so that moving a section never leaves a link dangling.
package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// maxReadmeBytes is the README's budget: what a newcomer needs, with the
// details in docs/.
const maxReadmeBytes = 20 << 10

func TestReadmeIsSmall(t *testing.T) {
	fi, err := os.Stat("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > maxReadmeBytes {
		t.Errorf("README.md is %d bytes, over its %d-byte budget: move details into docs/ and link them", fi.Size(), maxReadmeBytes)
	}
}

func TestRelativeLinksResolve(t *testing.T) {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{"../README.md"}, files...) {
		for _, l := range markdownLinks(t, f) {
			if err := checkLink(f, l); err != nil {
				t.Errorf("%s: link %q: %v", f, l, err)
			}
		}
	}
}

// checkLink resolves a relative link from the Markdown file from: its file
// must exist, and an anchor into a Markdown file must name one of its
// headings. Links with a scheme (https:, mailto:) are not checked.
func checkLink(from, link string) error {
	if regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`).MatchString(link) {
		return nil
	}
	target, anchor, _ := strings.Cut(link, "#")
	file := from
	if target != "" {
		file = filepath.Join(filepath.Dir(from), filepath.FromSlash(target))
		if _, err := os.Stat(file); err != nil {
			return fmt.Errorf("no such file: %s", file)
		}
	}
	if anchor == "" || !strings.HasSuffix(file, ".md") {
		return nil
	}
	anchors, err := headingAnchors(file)
	if err != nil {
		return err
	}
	if !anchors[anchor] {
		return fmt.Errorf("%s has no heading with the anchor #%s", file, anchor)
	}
	return nil
}

var (
	inlineLink = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*(\S+)`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
)

// markdownLinks lists the link targets of a Markdown file outside code
// blocks and code spans.
func markdownLinks(t *testing.T, file string) []string {
	t.Helper()
	lines, err := proseLines(file)
	if err != nil {
		t.Fatal(err)
	}
	var links []string
	for _, line := range lines {
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			links = append(links, m[1])
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			links = append(links, m[1])
		}
	}
	return links
}

// proseLines is a Markdown file's lines outside fenced code blocks, where
// a "#" starts a shell comment rather than a heading.
func proseLines(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var lines []string
	fence := ""
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
		case fence != "" && strings.HasPrefix(trimmed, fence):
			fence = ""
		case fence == "":
			lines = append(lines, line)
		}
	}
	return lines, nil
}

var (
	headingLine = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	htmlAnchor  = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	linkText    = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// headingAnchors is the set of anchors a Markdown file offers: its headings'
// slugs as GitHub makes them (and -1, -2… for repeats), and HTML anchors.
func headingAnchors(file string) (map[string]bool, error) {
	lines, err := proseLines(file)
	if err != nil {
		return nil, err
	}
	anchors := map[string]bool{}
	for _, line := range lines {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		m := headingLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := slugify(m[1])
		for i := 1; anchors[slug]; i++ {
			slug = fmt.Sprintf("%s-%d", slugify(m[1]), i)
		}
		anchors[slug] = true
	}
	return anchors, nil
}

// slugify is GitHub's heading anchor: the heading's text in lower case,
// with everything but letters, marks, digits, '_', '-' and spaces dropped
// and each space made a '-'.
func slugify(heading string) string {
	heading = linkText.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlugify(t *testing.T) {
	for heading, want := range map[string]string{
		"Running as a normal user":              "running-as-a-normal-user",
		"Images: `read_image`":                  "images-read_image",
		"MCP (Claude Code, Codex, OpenCode, …)": "mcp-claude-code-codex-opencode-",
		"The [reference](reference.md) itself":  "the-reference-itself",
		"Going back: every version kept":        "going-back-every-version-kept",
	} {
		if got := slugify(heading); got != want {
			t.Errorf("slugify(%q) = %q, want %q", heading, got, want)
		}
	}
}

// The checker itself: a link to a missing file, a missing heading or a
// heading inside a code block is caught; a repeated heading's -1 is not.
func TestCheckLinkCatchesBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("b.md", "# Top\n## Twice\n## Twice\n```sh\n# not-a-heading\n```\n")
	a := write("a.md", "see [b](b.md#twice-1), [c](c.md), [x](b.md#nope), [y](b.md#not-a-heading), `[z](z.md)`\n")
	var broken []string
	for _, l := range markdownLinks(t, a) {
		if checkLink(a, l) != nil {
			broken = append(broken, l)
		}
	}
	if want := []string{"c.md", "b.md#nope", "b.md#not-a-heading"}; strings.Join(broken, " ") != strings.Join(want, " ") {
		t.Errorf("broken links found: %q, want %q", broken, want)
	}
}
