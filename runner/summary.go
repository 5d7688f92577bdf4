package runner

import (
	"cmp"
	"math"
	"slices"
	"time"
)

func sortResults(rs []JobResult) {
	slices.SortFunc(rs, func(a, b JobResult) int { return cmp.Compare(a.Job, b.Job) })
}

// Summary aggregates a batch's results.
type Summary struct {
	Jobs           int     `json:"jobs"`
	Failed         int     `json:"failed"`
	ElapsedS       float64 `json:"elapsed_s"`
	WallP50S       float64 `json:"wall_p50_s"`
	WallP90S       float64 `json:"wall_p90_s"`
	WallMaxS       float64 `json:"wall_max_s"`
	JobsPerMin     float64 `json:"jobs_per_min"`
	MeanEfficiency float64 `json:"mean_cpu_efficiency"`
	Migrations     int64   `json:"migrations"`
	ThrottledS     float64 `json:"throttled_s"`
	// FramesPerSec is the frames all jobs reported over the batch's elapsed
	// time (0 when jobs report no frames).
	FramesPerSec float64 `json:"frames_per_s,omitempty"`
}

// Summarize computes the batch summary over results, elapsed being the
// batch's wall time. Percentiles use the nearest-rank method.
func Summarize(results []JobResult, elapsed time.Duration) Summary {
	s := Summary{Jobs: len(results), ElapsedS: elapsed.Seconds()}
	var walls []float64
	var eff, frames float64
	for _, r := range results {
		if r.ExitCode != 0 || r.Error != "" {
			s.Failed++
		}
		walls = append(walls, r.WallS)
		eff += r.Efficiency()
		s.Migrations += r.Migrations
		s.ThrottledS += r.ThrottledS
		frames += float64(r.Frames)
	}
	if len(walls) == 0 {
		return s
	}
	slices.Sort(walls)
	s.WallP50S = Percentile(walls, 50)
	s.WallP90S = Percentile(walls, 90)
	s.WallMaxS = walls[len(walls)-1]
	s.MeanEfficiency = eff / float64(len(results))
	if elapsed > 0 {
		s.FramesPerSec = frames / elapsed.Seconds()
		s.JobsPerMin = float64(len(results)-s.Failed) / elapsed.Minutes()
	}
	return s
}

// Percentile returns the nearest-rank p-th percentile of sorted values.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}
