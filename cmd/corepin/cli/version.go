package cli

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Commit and Date are set at build time like Version (make build, make
// dist): -X .../cmd/corepin/cli.Commit=<full hash>[-dirty] and
// -X .../cmd/corepin/cli.Date=<RFC 3339>, the commit's time.
var (
	Commit = ""
	Date   = ""
)

const versionUsage = `Print corepin's version, the commit it was built from and the build date
(the commit's time, so that a rebuild is identical). Set by make build and
make dist; a plain go build or go install reads them from Go's build info.

Examples:
  corepin version
  corepin version -o json
  corepin --version`

// VersionInfo is what corepin version prints (-o json: its fields).
type VersionInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Date    string `json:"date"`
	Go      string `json:"go"`
}

func (v VersionInfo) String() string {
	return fmt.Sprintf("corepin %s\ncommit  %s\ndate    %s\ngo      %s\n", v.Version, v.Commit, v.Date, v.Go)
}

// currentVersion is this binary's version: what the linker set, else Go's
// build info (a go build in a git checkout stamps vcs.revision, vcs.time
// and vcs.modified; go install module@version stamps the module version,
// whose pseudo-version carries the commit and its time), else "unknown".
func currentVersion() VersionInfo {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(Version, Commit, Date, bi)
}

func versionOf(version, commit, date string, bi *debug.BuildInfo) VersionInfo {
	v := VersionInfo{Version: version, Commit: commit, Date: date, Go: runtime.Version()}
	if bi == nil {
		bi = &debug.BuildInfo{}
	}
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	mod := bi.Main.Version
	if v.Version == "" || v.Version == "dev" {
		if mod != "" && mod != "(devel)" {
			v.Version = mod
		}
	}
	pseudoRev, pseudoTime, _ := parsePseudoVersion(mod)
	if v.Commit == "" {
		v.Commit = vcs["vcs.revision"]
		if v.Commit != "" && vcs["vcs.modified"] == "true" {
			v.Commit += "-dirty"
		}
	}
	if v.Commit == "" {
		v.Commit = pseudoRev
	}
	if v.Date == "" {
		v.Date = vcs["vcs.time"]
	}
	if v.Date == "" && !pseudoTime.IsZero() {
		v.Date = pseudoTime.Format(time.RFC3339)
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, p := range []*string{&v.Version, &v.Commit, &v.Date} {
		if *p == "" {
			*p = "unknown"
		}
	}
	return v
}

// parsePseudoVersion returns the commit prefix and the time a Go module
// pseudo-version names (vX.Y.Z-yyyymmddhhmmss-abcdefabcdef, also with
// .0. or -0. before the time and +incompatible or +dirty after), or
// ok=false for a release version or anything else. See
// https://go.dev/ref/mod#pseudo-versions.
func parsePseudoVersion(v string) (rev string, t time.Time, ok bool) {
	if !strings.HasPrefix(v, "v") {
		return "", time.Time{}, false
	}
	v, _, _ = strings.Cut(v, "+")
	i := strings.LastIndexByte(v, '-')
	if i < 0 {
		return "", time.Time{}, false
	}
	rev, rest := v[i+1:], v[:i]
	if len(rev) != 12 || strings.Trim(rev, "0123456789abcdef") != "" || len(rest) < 14 {
		return "", time.Time{}, false
	}
	stamp := rest[len(rest)-14:]
	if sep := rest[:len(rest)-14]; !strings.HasSuffix(sep, "-") && !strings.HasSuffix(sep, ".0.") && !strings.HasSuffix(sep, "-0.") {
		return "", time.Time{}, false
	}
	t, err := time.Parse("20060102150405", stamp)
	if err != nil {
		return "", time.Time{}, false
	}
	return rev, t, true
}

// setVersion gives the root its --version, printing what corepin version
// prints (-o json too). The flag is made here rather than by cobra at
// execution, so that "--version -o json" parses as two flags.
func setVersion(root *cobra.Command) {
	v := currentVersion()
	root.Version = v.Version
	j, _ := json.MarshalIndent(v, "", "  ")
	root.SetVersionTemplate(fmt.Sprintf(`{{if eq (.Flag "output").Value.String "json"}}%s{{"\n"}}{{else}}%s{{end}}`,
		strings.ReplaceAll(string(j), "{{", `{{"{{"}}`), strings.ReplaceAll(v.String(), "{{", `{{"{{"}}`)))
	root.InitDefaultVersionFlag()
}

func init() { register(newVersionCmd) }

func newVersionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date",
		Long:  versionUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := currentVersion()
			if e.JSON() {
				return e.PrintJSON(v)
			}
			_, err := fmt.Fprint(e.stdout, v)
			return err
		},
	}
}
