package main

import (
	"slices"
	"testing"
)

func TestHoistFlags(t *testing.T) {
	app := newApp()
	for _, tc := range []struct{ in, want []string }{
		{[]string{"dshfs", "mount", "b", "m", "--foreground"}, []string{"dshfs", "mount", "--foreground", "--", "b", "m"}},
		{[]string{"dshfs", "exec", "read", "--backing", "ws", "{}"}, []string{"dshfs", "exec", "--backing", "ws", "--", "read", "{}"}},
		{[]string{"dshfs", "exec", "--backing=ws", "read", "--", "-x"}, []string{"dshfs", "exec", "--backing=ws", "--", "read", "-x"}},
		{[]string{"dshfs", "tools"}, []string{"dshfs", "tools"}},
		{[]string{"dshfs", "nope", "a", "--b"}, []string{"dshfs", "nope", "a", "--b"}},
	} {
		if got := hoistFlags(app, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("hoistFlags(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
