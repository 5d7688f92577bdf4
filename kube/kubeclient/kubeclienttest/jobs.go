package kubeclienttest

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// JobController stands in for Kubernetes' Job controller over a fake
// clientset: it finishes a Job on its After-th read by name (GetJob),
// with the condition and the pods Finish gives, and it records what was
// asked of the Jobs: the creations, in order (with their options and the
// Jobs still unfinished at that moment) and the deletions. It is driven
// by the clientset's reactors, which the clientset serializes.
type JobController struct {
	// After is how many reads of a Job it takes to finish it; 0 never
	// finishes one.
	After int
	// Finish returns how the Job ends (batchv1.JobComplete or
	// JobFailed; "" leaves it running) and its pods, which are stored
	// with the Job as their controller and counted in its status.
	Finish func(j *batchv1.Job) (batchv1.JobConditionType, []*corev1.Pod)

	// Created names the Jobs created, in order; CreateOptions are their
	// options; Overlapped names the Jobs created while another Job of the
	// namespace had not finished.
	Created       []string
	CreateOptions []metav1.CreateOptions
	Overlapped    []string
	// Deleted names the Jobs deleted, with their options.
	Deleted       []string
	DeleteOptions []metav1.DeleteOptions

	reads map[string]int
}

var jobsResource = batchv1.SchemeGroupVersion.WithResource("jobs")

// Install adds c's reactors to cs, before its object tracker.
func (c *JobController) Install(cs *fake.Clientset) {
	c.reads = map[string]int{}
	tr := cs.Tracker()
	cs.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateActionImpl)
		j := ca.Object.(*batchv1.Job)
		if _, err := tr.Get(jobsResource, a.GetNamespace(), j.Name); err == nil {
			return false, nil, nil // the tracker refuses it: AlreadyExists
		}
		c.Created = append(c.Created, j.Name)
		c.CreateOptions = append(c.CreateOptions, ca.CreateOptions)
		list, err := tr.List(jobsResource, batchv1.SchemeGroupVersion.WithKind("Job"), a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		for _, o := range list.(*batchv1.JobList).Items {
			if !finished(&o) {
				c.Overlapped = append(c.Overlapped, j.Name)
				break
			}
		}
		return false, nil, nil
	})
	cs.PrependReactor("get", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.GetActionImpl).Name
		c.reads[name]++
		if c.After == 0 || c.reads[name] != c.After || c.Finish == nil {
			return false, nil, nil
		}
		o, err := tr.Get(jobsResource, a.GetNamespace(), name)
		if err != nil {
			return false, nil, nil // the tracker says NotFound
		}
		j := o.(*batchv1.Job).DeepCopy()
		cond, pods := c.Finish(j)
		for i, p := range pods {
			p = p.DeepCopy()
			if p.Name == "" {
				p.Name = fmt.Sprintf("%s-%d", j.Name, i)
			}
			p.Namespace = j.Namespace
			p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}
			if err := tr.Create(corev1.SchemeGroupVersion.WithResource("pods"), p, p.Namespace); err != nil {
				return true, nil, err
			}
			switch p.Status.Phase {
			case corev1.PodSucceeded:
				j.Status.Succeeded++
			case corev1.PodFailed:
				j.Status.Failed++
			}
		}
		switch cond {
		case batchv1.JobComplete:
			j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: cond, Status: corev1.ConditionTrue, Reason: "CompletionsReached"})
		case batchv1.JobFailed:
			j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: cond, Status: corev1.ConditionTrue,
				Reason: batchv1.JobReasonBackoffLimitExceeded, Message: "Job has reached the specified backoff limit"})
		}
		if err := tr.Update(jobsResource, j, j.Namespace); err != nil {
			return true, nil, err
		}
		return false, nil, nil
	})
	cs.PrependReactor("delete", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		da := a.(k8stesting.DeleteActionImpl)
		c.Deleted = append(c.Deleted, da.Name)
		c.DeleteOptions = append(c.DeleteOptions, da.DeleteOptions)
		return false, nil, nil
	})
}

// Reads is how many times the Job name was read.
func (c *JobController) Reads(name string) int { return c.reads[name] }

func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
