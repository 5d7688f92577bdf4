package nodeview

import (
	"bytes"
	"slices"
)

// uidSet is the set of pod UIDs a node's published state names
// (nodestate.Judged.Admitted), held by the view for as long as the state,
// for thousands of nodes: sorted, a UID of the API server's form (a
// lowercase UUID) in its 16 bytes, any other as its text.
type uidSet struct {
	// names says the state names its pods' UIDs (Admitted not nil).
	names bool
	uuids [][16]byte
	other []string
}

// newUIDSet is the set of admitted's UIDs; nil names none.
func newUIDSet(admitted map[string]struct{}) uidSet {
	s := uidSet{names: admitted != nil}
	for uid := range admitted {
		if u, ok := parseUUID(uid); ok {
			s.uuids = append(s.uuids, u)
		} else {
			s.other = append(s.other, uid)
		}
	}
	slices.SortFunc(s.uuids, compareUUID)
	slices.Sort(s.other)
	return s
}

// has reports whether the set holds uid.
func (s uidSet) has(uid string) bool {
	if u, ok := parseUUID(uid); ok {
		_, found := slices.BinarySearchFunc(s.uuids, u, compareUUID)
		return found
	}
	_, found := slices.BinarySearch(s.other, uid)
	return found
}

func compareUUID(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) }

// len is the number of UIDs held.
func (s uidSet) len() int { return len(s.uuids) + len(s.other) }

// parseUUID reads a UUID in its canonical lowercase text (8-4-4-4-12 hex
// digits): the only text whose bytes name it, so that a UID of another
// form (upper case included) is never taken for one of this form.
func parseUUID(s string) (u [16]byte, ok bool) {
	if len(s) != 36 {
		return u, false
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if s[i] != '-' {
				return u, false
			}
			i++
			continue
		}
		hi, ok1 := hexDigit(s[i])
		lo, ok2 := hexDigit(s[i+1])
		if !ok1 || !ok2 {
			return u, false
		}
		u[j] = hi<<4 | lo
		i, j = i+2, j+1
	}
	return u, true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
