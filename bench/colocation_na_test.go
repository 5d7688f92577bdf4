package bench

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/experiment"
)

// Issue 27 §3: the colocation table printed NaN where a figure does not
// apply: the batch's CPUs on the row of the service alone, and "batch
// alone used NaN CPUs" under nginx, whose policies had no batch-alone
// point. Such cells are "-" (null in JSON) and the note names the batch's
// CPUs alone only where it was measured.
func TestColocationTableNotApplicable(t *testing.T) {
	svc := func(p99 float64) experiment.Metrics {
		return experiment.Metrics{"p99_ms": p99, "p50_ms": 1, "rps": 100, "errors": 0}
	}
	withBatch := func(p99, batch float64) experiment.Metrics {
		m := svc(p99)
		m["batch_cpus"], m["idle_cpus"] = batch, 0.1
		return m
	}
	pt := func(service, pol string, ms ...experiment.Metrics) experiment.PointResult {
		return experiment.PointResult{Point: experiment.P("service", service, "policy", pol), Repeats: ms}
	}
	pts := []experiment.PointResult{
		pt(svcCPU, polAlone, svc(10), svc(11)),
		pt(svcCPU, polBatchAlone, experiment.Metrics{"batch_cpus": 2}, experiment.Metrics{"batch_cpus": 2}),
		pt(svcCPU, polCorepin, withBatch(10.5, 1.4), withBatch(10.8, 1.4)),
		pt(svcNginx, polAlone, svc(2), svc(2.2)),
		pt(svcNginx, polCorepin, withBatch(2.1, 1.5), withBatch(2.3, 1.5)),
	}
	e := &colocationExp{}
	e.Spec(true)
	a := e.Analyze(&Env{}, pts)
	tables := map[string]Table{}
	for _, tb := range a.Tables {
		switch {
		case strings.Contains(tb.Title, "built-in service"):
			tables[svcCPU] = tb
		case strings.Contains(tb.Title, "nginx"):
			tables[svcNginx] = tb
		}
	}
	batchCol := colIndex(t, tables[svcCPU], "batch CPUs")
	shareCol := colIndex(t, tables[svcCPU], "batch / idle CPU")
	tests := []struct {
		name, service, policy string
		wantBatch, wantShare  string
		noteHas, noteHasNot   string
	}{
		{name: "cpu service alone", service: svcCPU, policy: polAlone, wantBatch: NotApplicable, wantShare: NotApplicable,
			noteHas: "; the batch alone used 2.00 CPUs"},
		{name: "cpu batch alone", service: svcCPU, policy: polBatchAlone, wantBatch: "2.00", wantShare: NotApplicable},
		{name: "cpu corepin", service: svcCPU, policy: polCorepin, wantBatch: "1.40", wantShare: "93%"},
		{name: "nginx alone", service: svcNginx, policy: polAlone, wantBatch: NotApplicable, wantShare: NotApplicable,
			noteHasNot: "batch alone used"},
		{name: "nginx corepin", service: svcNginx, policy: polCorepin, wantBatch: "1.50", wantShare: "94%"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb := tables[tc.service]
			var row []string
			for _, r := range tb.Rows {
				if r[0] == tc.policy {
					row = r
				}
			}
			if row == nil {
				t.Fatalf("no %s row in %q: %v", tc.policy, tb.Title, tb.Rows)
			}
			if row[batchCol] != tc.wantBatch || row[shareCol] != tc.wantShare {
				t.Errorf("%s row: batch CPUs %q, batch / idle CPU %q; want %q, %q", tc.policy, row[batchCol], row[shareCol], tc.wantBatch, tc.wantShare)
			}
			for _, c := range row {
				if strings.Contains(c, "NaN") || strings.Contains(c, "Inf") {
					t.Errorf("%s row has a cell %q: %v", tc.policy, c, row)
				}
			}
			if strings.Contains(tb.Note, "NaN") || !strings.Contains(tb.Note, tc.noteHas) ||
				(tc.noteHasNot != "" && strings.Contains(tb.Note, tc.noteHasNot)) {
				t.Errorf("note %q: want it to say %q and not %q, and no NaN", tb.Note, tc.noteHas, tc.noteHasNot)
			}
		})
	}
	t.Run("JSON", func(t *testing.T) {
		b, err := json.Marshal(tables[svcNginx])
		if err != nil {
			t.Fatal(err)
		}
		var rows struct{ Rows [][]*string }
		if err := json.Unmarshal(b, &rows); err != nil {
			t.Fatal(err)
		}
		if got := rows.Rows[0][batchCol]; got != nil {
			t.Errorf("JSON of the alone row's batch CPUs = %q, want null: %s", *got, b)
		}
		var back Table
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tables[svcNginx], back); diff != "" {
			t.Errorf("table after a JSON round trip differs (-before +after):\n%s", diff)
		}
	})
}

func colIndex(t *testing.T, tb Table, name string) int {
	t.Helper()
	for i, c := range tb.Columns {
		if c == name {
			return i
		}
	}
	t.Fatalf("no column %q in %v", name, tb.Columns)
	return -1
}
