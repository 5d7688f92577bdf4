package topology

import (
	"fmt"
	"slices"

	"github.com/corepin/corepin/cpuset"
)

// ARM big.LITTLE kinds, ranked by cpu_capacity.
const (
	KindBig    = "big"
	KindMedium = "medium"
	KindLittle = "little"
)

// kinds returns the hybrid kind of each online CPU, or nil on a machine with
// one kind of CPU. Sources, in order:
//   - the hybrid PMU devices /sys/devices/cpu_core/cpus and cpu_atom/cpus
//     (Intel, kernel >= 5.13);
//   - cpufreq/base_frequency (intel_pstate), which differs between P- and
//     E-cores on hybrid parts and is uniform otherwise (turbo maxima vary per
//     core on non-hybrid parts, so they are not used);
//   - cpu_capacity (arm64 big.LITTLE), ranked big / medium / little.
func (d *discoverer) kinds(online cpuset.CPUSet) (map[int]string, error) {
	out := map[int]string{}
	for _, k := range []string{KindCore, KindAtom} {
		set, ok, err := d.readSet("sys/devices/cpu_"+k+"/cpus", false)
		if err != nil {
			return nil, err
		}
		if ok {
			for cpu := range set.Intersection(online).All() {
				out[cpu] = k
			}
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	rank := func(file string, names func(i, n int) string) (bool, error) {
		vals := map[int]int{}
		for cpu := range online.All() {
			v, ok, err := d.readInt(fmt.Sprintf("%s/cpu%d/%s", cpuDir, cpu, file))
			if err != nil {
				return false, err
			}
			if !ok {
				return false, nil // all or nothing
			}
			vals[cpu] = v
		}
		var distinct []int
		for _, v := range vals {
			if !slices.Contains(distinct, v) {
				distinct = append(distinct, v)
			}
		}
		if len(distinct) < 2 {
			return false, nil
		}
		slices.Sort(distinct)
		slices.Reverse(distinct) // highest first
		for cpu, v := range vals {
			out[cpu] = names(slices.Index(distinct, v), len(distinct))
		}
		return true, nil
	}
	if ok, err := rank("cpufreq/base_frequency", func(i, n int) string {
		if i == 0 {
			return KindCore
		}
		return KindAtom
	}); err != nil || ok {
		return out, err
	}
	_, err := rank("cpu_capacity", func(i, n int) string {
		switch i {
		case 0:
			return KindBig
		case n - 1:
			return KindLittle
		}
		return KindMedium
	})
	return out, err
}
