// Command corepin-scheduler is kube-scheduler with corepin's framework
// plugin (package plugin) registered as "Corepin". It takes kube-scheduler's
// own flags and configuration; a profile enables the plugin, e.g.
//
//	apiVersion: kubescheduler.config.k8s.io/v1
//	kind: KubeSchedulerConfiguration
//	profiles:
//	- schedulerName: corepin
//	  plugins:
//	    multiPoint:
//	      enabled:
//	      - name: Corepin
//
//	corepin-scheduler --config sched.yaml --kubeconfig ~/.kube/config
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/corepin/corepin/scheduler/plugin"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand(app.WithPlugin(plugin.Name, plugin.New))))
}
