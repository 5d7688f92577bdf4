// Package quote quotes untrusted input for error messages without carrying
// all of it: a file under a hostile --sysfs-root may hold megabytes, or a
// secret the user never meant to print.
package quote

import "strconv"

// MaxPrefix is the longest prefix of the input that Short quotes, in bytes.
const MaxPrefix = 40

// Short returns s quoted as by %q when it is at most MaxPrefix bytes long;
// otherwise it quotes only the first MaxPrefix bytes and says how long s
// was, e.g. "aaaa..." (1048576 bytes). It never returns more than about
// 4*MaxPrefix+30 bytes, whatever s holds.
func Short(s string) string {
	if len(s) <= MaxPrefix {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:MaxPrefix]) + "... (" + strconv.Itoa(len(s)) + " bytes)"
}
