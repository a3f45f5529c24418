package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// hoistFlags moves a subcommand's flags in front of its positional
// arguments, so `dshfs mount B M --foreground` means what it says: the
// flag parser urfave/cli uses stops at the first positional argument. A
// "--" ends flag parsing as usual.
func hoistFlags(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	cmd := app.Command(args[1])
	if cmd == nil {
		return args
	}
	if len(cmd.Subcommands) > 0 { // dshfs branch new NAME --actor A: the subcommand's flags
		return append([]string{args[0]}, hoistFlags(&cli.App{Commands: cmd.Subcommands}, args[1:])...)
	}
	takesValue := valueFlags(cmd)
	var flags, positional []string
	rest := args[2:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--":
			positional = append(positional, rest[i+1:]...)
			i = len(rest)
		case strings.HasPrefix(a, "-") && a != "-":
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if takesValue[name] && !strings.Contains(name, "=") && i+1 < len(rest) {
				i++
				flags = append(flags, rest[i])
			}
		default:
			positional = append(positional, a)
		}
	}
	out := append([]string{args[0], args[1]}, flags...)
	if len(positional) > 0 {
		out = append(out, "--")
		out = append(out, positional...)
	}
	return out
}

// valueFlags says, for each of cmd's flag names, whether the flag takes a
// value (every flag but a bool one).
func valueFlags(cmd *cli.Command) map[string]bool {
	takesValue := map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, name := range f.Names() {
			takesValue[name] = !isBool
		}
	}
	return takesValue
}
