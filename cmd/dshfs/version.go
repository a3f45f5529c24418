package main

import (
	"regexp"
	"runtime/debug"
)

// version, when set at build time (-ldflags "-X main.version=v1.2.3"), is
// what --version prints; otherwise the build info says.
var version string

func buildVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return versionOf(bi)
}

// pseudoVersion matches a Go pseudo-version (v0.0.0-20250102030405-abcdef123456),
// which names a commit, not a release.
var pseudoVersion = regexp.MustCompile(`-(\d+\.)?\d{14}-[0-9a-f]{12}(\+dirty)?$`)

// versionOf is the module's version (go install …@v1.2.3) or, built from a
// checkout, its commit: "4d013f6a1b2c+dirty (2025-12-01T09:53:00Z)", with
// "+dirty" when the tree had uncommitted changes.
func versionOf(bi *debug.BuildInfo) string {
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	release := bi.Main.Version
	if release == "(devel)" || pseudoVersion.MatchString(release) && vcs["vcs.revision"] != "" {
		release = ""
	}
	rev := vcs["vcs.revision"]
	if rev == "" {
		if release == "" {
			return "devel"
		}
		return release
	}
	desc := rev[:min(12, len(rev))]
	if vcs["vcs.modified"] == "true" {
		desc += "+dirty"
	}
	if t := vcs["vcs.time"]; t != "" {
		desc += " (" + t + ")"
	}
	if release != "" {
		return release + " " + desc
	}
	return desc
}
