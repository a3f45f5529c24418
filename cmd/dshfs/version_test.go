package main

import (
	"runtime/debug"
	"testing"
)

func TestVersionOf(t *testing.T) {
	vcs := func(rev, time, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: time}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "4d013f6a1b2c3d4e5f60718293a4b5c6d7e8f901"
	for _, tc := range []struct {
		name     string
		main     string
		settings []debug.BuildSetting
		want     string
	}{
		{"go install of a release", "v1.2.3", nil, "v1.2.3"},
		{"go install of a commit", "v0.0.0-20251201095300-4d013f6a1b2c", nil, "v0.0.0-20251201095300-4d013f6a1b2c"},
		{"a checkout, clean", "v0.0.0-20251201095300-4d013f6a1b2c", vcs(rev, "2025-12-01T09:53:00Z", "false"), "4d013f6a1b2c (2025-12-01T09:53:00Z)"},
		{"a checkout, changed", "v0.0.0-20251201095300-4d013f6a1b2c+dirty", vcs(rev, "2025-12-01T09:53:00Z", "true"), "4d013f6a1b2c+dirty (2025-12-01T09:53:00Z)"},
		{"a tagged checkout", "v1.2.3", vcs(rev, "2025-12-01T09:53:00Z", "false"), "v1.2.3 4d013f6a1b2c (2025-12-01T09:53:00Z)"},
		{"no version information", "(devel)", nil, "devel"},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Version: tc.main}, Settings: tc.settings}
		if got := versionOf(bi); got != tc.want {
			t.Errorf("%s: versionOf = %q, want %q", tc.name, got, tc.want)
		}
	}
}
