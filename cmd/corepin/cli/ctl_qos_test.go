package cli

import (
	"strings"
	"testing"

	"github.com/corepin/corepin/agent"
)

func TestQoSLines(t *testing.T) {
	got := qosLines(&agent.QoSStatus{Mechanism: "quota", Lever: "cpu.idle", BECpuset: "0-1", BEPool: "0-1", Level: 0.5,
		Suppression: 0.75, BEQuotaMS: 50, PSI: 12, RunqWaitMS: 3, Slice: "1ms", Actions: map[string]uint64{"shrink": 2, "backoff": 1}})
	want := "QOS quota via cpu.idle: BE on 0-1 of pool 0-1 (level 0.50 CPUs, suppression 75%, quota 50.0ms)\n" +
		"QOS signals: LS usage 0.00 CPUs, psi 12.0%, run-queue wait 3.0ms/s, throttled 0%, slice 1ms\n" +
		"QOS actions: backoff=1 shrink=2\n"
	if got != want {
		t.Errorf("qosLines() =\n%s\nwant\n%s", got, want)
	}
	if strings.Contains(got, "error") {
		t.Errorf("qosLines() shows an error line without an error")
	}
}
