package main

import (
	"bytes"
	"strings"
	"testing"
)

// Help shows each flag's default once: urfave/cli prints it from Value or
// DefaultText, so no Usage says it again.
func TestHelpDefaultsOnce(t *testing.T) {
	app := newApp()
	for _, c := range app.Commands {
		var buf bytes.Buffer
		app.Writer = &buf
		if err := app.Run([]string{"dshfs", "help", c.Name}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), "--help, -h") {
			t.Fatalf("dshfs help %s printed %q", c.Name, buf.String())
		}
		for _, line := range strings.Split(buf.String(), "\n") {
			if strings.Count(line, "(default:") > 1 {
				t.Errorf("dshfs %s --help: %q", c.Name, strings.TrimSpace(line))
			}
		}
	}
}
