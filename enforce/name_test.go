package enforce

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		ok   bool
	}{
		{name: "simple", in: "job-1", ok: true},
		{name: "all allowed bytes", in: "Az09-_.x", ok: true},
		{name: "max length", in: strings.Repeat("a", MaxNameLen), ok: true},
		{name: "too long", in: strings.Repeat("a", MaxNameLen+1)},
		{name: "empty", in: ""},
		{name: "dot", in: "."},
		{name: "dotdot", in: ".."},
		{name: "dotdot inside", in: "a..b"},
		{name: "leading dot", in: ".hidden"},
		{name: "leading dash", in: "-rf"},
		{name: "slash", in: "a/b"},
		{name: "traversal", in: "../../etc"},
		{name: "absolute", in: "/etc"},
		{name: "space", in: "a b"},
		{name: "newline", in: "a\nb"},
		{name: "NUL", in: "a\x00b"},
		{name: "non-ASCII", in: "jöb"},
		{name: "backslash", in: `a\b`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateName(tc.in)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidName)) {
				t.Errorf("ValidateName(%q) = %v, want ok=%v", tc.in, err, tc.ok)
			}
		})
	}
}

func TestCleanParent(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"", "."}, {"/", "."}, {"/system.slice/corepin.service", "system.slice/corepin.service"},
		{"a/b/", "a/b"}, {"/../..", "."}, {"a/../../b", "b"},
	} {
		got, err := cleanParent(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("cleanParent(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestDirName(t *testing.T) {
	o := owner{PID: 4242, Start: 987654}
	dn := dirName(o, "enc-1.x")
	if dn != "run-4242-987654-enc-1.x" {
		t.Errorf("dirName = %q", dn)
	}
	got, name, ok := parseDirName(dn)
	if !ok || got != o || name != "enc-1.x" {
		t.Errorf("parseDirName(%q) = %v, %q, %v", dn, got, name, ok)
	}
	for _, bad := range []string{"run-", "run-1-2", "run-1-2-", "run-01-2-x", "run--1-2-x", "run-0-2-x",
		"run-1-x-y", "run-1-2-..", "job-1-2-x", "run-99999999999999999999-1-x"} {
		if _, _, ok := parseDirName(bad); ok {
			t.Errorf("parseDirName(%q) ok, want rejected", bad)
		}
	}
}
