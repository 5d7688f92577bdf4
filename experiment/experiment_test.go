package experiment

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/topology"
)

func TestParseParams(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Params
		wantErr bool
	}{
		{name: "empty", in: "", want: Params{}},
		{name: "old run", in: `{"quick":true,"repeats":5,"driver":"cgroup-v1","commands":["corepin bench --quick"],"spec":"x.yaml"}`,
			want: Params{Quick: true, Repeats: 5, Driver: "cgroup-v1", Commands: []string{"corepin bench --quick"}, SpecFile: "x.yaml"}},
		{name: "not an object", in: `[1]`, wantErr: true},
		{name: "truncated", in: `{"quick":`, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseParams([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseParams(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); !tc.wantErr && diff != "" {
				t.Errorf("ParseParams(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// A point keeps its coordinates' order through JSON, both ways.
func TestPointJSONKeepsOrder(t *testing.T) {
	p := P("threads", 2, "cpus", "1.5", "mode", "pinned")
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"threads":"2","cpus":"1.5","mode":"pinned"}`; string(b) != want {
		t.Errorf("Marshal = %s, want %s", b, want)
	}
	var back Point
	if err := json.Unmarshal([]byte(`{"z":1,"a":"x","m":true}`), &back); err != nil {
		t.Fatal(err)
	}
	if got := back.Label(); got != "z=1 a=x m=true" {
		t.Errorf("Label() of the decoded point = %q, want z=1 a=x m=true", got)
	}
}

// FuzzParsePoint: whatever ParsePoint accepts encodes back to a document
// it reads as the same point.
func FuzzParsePoint(f *testing.F) {
	f.Add([]byte(`{"cpus":"2","mode":"pinned","concurrency":"4"}`))
	f.Add([]byte(`{"config":"8x2","write":"no"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[1]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePoint(b)
		if err != nil {
			return
		}
		enc, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("Marshal(%v): %v", p, err)
		}
		back, err := ParsePoint(enc)
		if err != nil {
			t.Fatalf("ParsePoint(%s) of an encoded point: %v", enc, err)
		}
		if !slices.Equal(p, back) {
			t.Errorf("ParsePoint(Marshal(%v)) = %v", p, back)
		}
	})
}

// fakeCluster is the least experiment with a cluster form.
type fakeCluster struct {
	name string
	spec struct{ N int }
}

func (f *fakeCluster) Name() string     { return f.name }
func (f *fakeCluster) Spec(bool) any    { f.spec.N = 1; return &f.spec }
func (f *fakeCluster) CurrentSpec() any { return &f.spec }
func (f *fakeCluster) ClusterPoints(*topology.Topology, bool) []Point {
	return []Point{P("n", f.spec.N)}
}
func (f *fakeCluster) PointKeys() []string                             { return []string{"n"} }
func (f *fakeCluster) Pods(Point, int) (PodSpec, error)                { return PodSpec{Pods: f.spec.N}, nil }
func (f *fakeCluster) Workload(bin string, _ Point, _ string) []string { return []string{bin} }
func (f *fakeCluster) JobSeconds() float64                             { return 1 }
func (f *fakeCluster) Metrics(Point, []runner.JobResult) Metrics       { return Metrics{} }

// A Catalog hands out fresh experiments: configuring one leaves the next
// lookup's defaults alone; an unknown name lists the known ones.
func TestCatalog(t *testing.T) {
	cat := Catalog(func() []Cluster { return []Cluster{&fakeCluster{name: "x"}, &fakeCluster{name: "y"}} })
	if got := cat.Names(); !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("Names() = %v, want [x y]", got)
	}
	if got := cat.Index("y"); got != 1 {
		t.Errorf("Index(y) = %d, want 1", got)
	}
	e, err := cat.Lookup("y")
	if err != nil || e.Name() != "y" {
		t.Fatalf("Lookup(y) = %v, %v", e, err)
	}
	if err := Configure([]Cluster{e}, []byte("y:\n  n: 5\n"), false); err != nil {
		t.Fatal(err)
	}
	again, _ := cat.Lookup("y")
	if again.CurrentSpec().(*struct{ N int }).N != 0 {
		t.Errorf("a second Lookup(y) sees the first one's spec")
	}
	_, err = cat.Lookup("z")
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "choose from x, y") {
		t.Errorf("Lookup(z) error = %v, want ErrUsage listing x, y", err)
	}
	if _, err := Catalog(nil).Lookup("x"); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "no experiments") {
		t.Errorf("Lookup on no catalog: error = %v, want ErrUsage saying there are no experiments", err)
	}
}
