// Command render prints the chart as helm template would: render --chart
// DIR --namespace NS --kube-version V [--set k=v]... (make e2e-deploy
// builds it; test/kube/e2ekubelet installs what it prints).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/corepin/corepin/test/helm/helmrender"
)

type sets []string

func (s *sets) String() string     { return strings.Join(*s, ",") }
func (s *sets) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	chart := flag.String("chart", "", "the chart's directory")
	ns := flag.String("namespace", "default", "the release's namespace")
	kv := flag.String("kube-version", "v1.36.3", "the cluster's Kubernetes version")
	var ss sets
	flag.Var(&ss, "set", "a value as helm --set takes it (repeatable)")
	flag.Parse()
	if *chart == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: render --chart DIR [--namespace NS] [--kube-version V] [--set k=v]...")
		os.Exit(2)
	}
	vals, err := helmrender.Values(ss...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(2)
	}
	m, err := helmrender.Template(*chart, *ns, *kv, vals)
	if err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
	fmt.Print(m)
}
