package store

import (
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// BenchmarkAdmitCommit is the state file's share of an admission: 500
// sequential Admits of one assignment, each deleted before the next (one
// transaction each, as the agent's create and delete), on a file in a
// temporary directory. It reports p50 and p99 of the Admit. Run with
// -benchtime=1x; each iteration is 500 admissions.
func BenchmarkAdmitCommit(b *testing.B) {
	db := openT(b, filepath.Join(b.TempDir(), "state.db"))
	lat := make([]time.Duration, 0, 500*b.N)
	for i := range 500 * b.N {
		name := "adm-" + strconv.Itoa(i%4)
		t0 := time.Now()
		if _, err := db.Admit(name, func([]Assignment) (Assignment, error) {
			return Assignment{Cpuset: "1", QoS: "LSE", Request: []byte(`{"name":"` + name + `"}`)}, nil
		}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		if err := db.DeleteAssignment(name); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
