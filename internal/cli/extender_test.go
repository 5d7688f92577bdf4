package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// TestExtenderServesFilter runs `corepin extender` in process on a free
// port and sends it the scheduler's JSON over real HTTP.
func TestExtenderServesFilter(t *testing.T) {
	line, stop := startInProcess(t, "extender", "--listen", "127.0.0.1:0", "-o", "json")
	var addr struct {
		Listen string `json:"listen"`
	}
	if err := json.Unmarshal([]byte(line), &addr); err != nil {
		t.Fatalf("first line %q: %v", line, err)
	}
	body, err := os.ReadFile("../../kube/extender/testdata/filter-single-numa.json")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+addr.Listen+"/filter", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST /filter: %v", err)
	}
	var res extenderv1.ExtenderFilterResult
	err = json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("decoding the filter result: %v", err)
	}
	if res.Nodes == nil || len(res.Nodes.Items) != 1 || res.Nodes.Items[0].Name != "whole" {
		t.Errorf("filter kept %+v, want only node whole", res.Nodes)
	}
	if err := stop(); err != nil {
		t.Errorf("extender exit = %v, want nil after cancel", err)
	}
}

func TestExtenderRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{{"extender", "--max-nodes", "0"}, {"extender", "--max-body-bytes", "10"}, {"extender", "x"}} {
		var out, errb strings.Builder
		if code := Main(args, strings.NewReader(""), &out, &errb); code != 2 || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line", args, code, errb.String())
		}
	}
}
