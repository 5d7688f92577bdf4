// Package podmeta reads a pod's corepin metadata into one placement wish:
// the QoS class (Koordinator's label, else the kubelet's QoS class), the
// CPU bind and exclusive policies (Koordinator's resource-spec annotation,
// strictly parsed), the topology policy (corepin.io/numa-policy) and the
// use of isolated CPUs (corepin.io/isolated-cpus), the LS real-time route
// (corepin.io/sched) and interrupts kept off exclusive CPUs
// (corepin.io/irq-isolate). The
// scheduler extender (kube/extender, over corev1.Pod) and the NRI plugin
// (kube/nri, over the runtime's PodSandbox and Container) both read pods
// through it, so the cluster view and the node cannot disagree about what
// a pod asks for.
//
// It takes plain inputs (labels, annotations, the kubelet's QoS class and a
// size in millicpus) and does no I/O; it depends on neither k8s.io/api nor
// containerd's NRI types. Every error wraps ErrInvalid and names the label
// or annotation at fault.
package podmeta
