package main

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionFromBuildInfo covers the builds a user meets: `go install …@vX.Y.Z` (the tag, no VCS
// stamp), `go install …@main` (a pseudo-version), a build in a git checkout (vcs.* settings) and a
// build without VCS stamping.
func TestVersionFromBuildInfo(t *testing.T) {
	t.Parallel()
	const path = "github.com/outboxkit/outboxkit"
	cases := []struct {
		name string
		info debug.BuildInfo
		want versionInfo
	}{
		{
			name: "go install at a tag",
			info: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: path, Version: "v1.2.3", Sum: "h1:abc="}},
			want: versionInfo{Version: "v1.2.3", Commit: "v1.2.3 (the tag; module " + path + " h1:abc=)", Go: "go1.26.8"},
		},
		{
			name: "go install at a pseudo-version",
			info: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: path, Version: "v0.0.0-20261207073811-22745c7a1b2c"}},
			want: versionInfo{Version: "v0.0.0-20261207073811-22745c7a1b2c", Commit: "22745c7a1b2c (from the pseudo-version)", Go: "go1.26.8"},
		},
		{
			name: "checkout with VCS stamping",
			info: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: path, Version: "v0.0.0-20261207073811-22745c7a1b2c+dirty"},
				Settings: []debug.BuildSetting{
					{Key: "vcs", Value: "git"},
					{Key: "vcs.revision", Value: "22745c7a1b2c3d4e5f60718293a4b5c6d7e8f901"},
					{Key: "vcs.time", Value: "2026-12-07T07:38:11Z"},
					{Key: "vcs.modified", Value: "true"},
				}},
			want: versionInfo{Version: "v0.0.0-20261207073811-22745c7a1b2c+dirty",
				Commit: "22745c7a1b2c3d4e5f60718293a4b5c6d7e8f901 (modified) 2026-12-07T07:38:11Z", Go: "go1.26.8"},
		},
		{
			name: "checkout without VCS stamping",
			info: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: path, Version: "(devel)"}},
			want: versionInfo{Version: "(devel)",
				Commit: "unknown (built without VCS stamping: outside a git checkout, or with -buildvcs=false)", Go: "go1.26.8"},
		},
	}
	for _, c := range cases {
		if got := versionFromBuildInfo(&c.info); got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

// TestVersionString checks the printed form: one "name value" line each for the version, the
// commit and the Go version with the platform.
func TestVersionString(t *testing.T) {
	t.Parallel()
	got := versionInfo{Version: "v1.2.3", Commit: "v1.2.3 (the tag)", Go: "go1.26.8"}.String()
	want := "outboxkit v1.2.3\ncommit    v1.2.3 (the tag)\ngo        go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if strings.Count(got, "\n") != 2 {
		t.Errorf("want three lines, got %q", got)
	}
}
