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
	var runs [][]string
	for _, c := range app.Commands {
		if len(c.Subcommands) == 0 {
			runs = append(runs, []string{"dshfs", "help", c.Name})
		}
		for _, sc := range c.Subcommands {
			runs = append(runs, []string{"dshfs", c.Name, sc.Name, "--help"})
		}
	}
	for _, args := range runs {
		app := newApp()
		var buf bytes.Buffer
		app.Writer = &buf
		name := strings.Join(args[1:], " ")
		if err := app.Run(args); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), "--help, -h") {
			t.Fatalf("dshfs %s printed %q", name, buf.String())
		}
		for _, line := range strings.Split(buf.String(), "\n") {
			if strings.Count(line, "(default:") > 1 {
				t.Errorf("dshfs %s: %q", name, strings.TrimSpace(line))
			}
		}
	}
}
