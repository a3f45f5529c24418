package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"golang.org/x/term"
)

// progressBar draws a one-line bar on a terminal and nothing otherwise.
type progressBar struct {
	w     io.Writer
	label string
	on    bool
	drawn bool
}

func newProgressBar(f *os.File, label string) *progressBar {
	return &progressBar{w: f, label: label, on: term.IsTerminal(int(f.Fd()))}
}

func (p *progressBar) update(pr unixsocket.Progress) {
	if !p.on || pr.Total == 0 {
		return
	}
	const width = 30
	filled := width * pr.Done / pr.Total
	fmt.Fprintf(p.w, "\r%s [%s%s] %d/%d", p.label, strings.Repeat("#", filled), strings.Repeat("-", width-filled), pr.Done, pr.Total)
	p.drawn = true
}

func (p *progressBar) done() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
