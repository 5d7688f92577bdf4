// Package workload holds the workloads corepin runs and benchmarks: a real
// x264 transcode (ffmpeg with libx264, the field's reference batch job) and
// a pure-Go CPU kernel for machines without ffmpeg.
//
// Both are libraries first. The CLI (`corepin workload transcode|spin`) is a
// thin layer over [Transcode] and [Spin]; `corepin run` launches that CLI as
// child commands, and `corepin bench` uses this package to build those
// commands ([SpinArgs], [TranscodeArgs], or the raw ffmpeg argv of
// [TranscodeCommand]) and to read their results
// ([ParseReport], [ParseProgress], [ParseStats]).
//
// # Threads
//
// A workload's thread count is what corepin sizes to the CPUs a job was given
// (an encoder told "auto" instead lost about 20% in the seeds' runs).
// [ResolveThreads] turns "auto" into $COREPIN_THREADS when `corepin run` set
// it, else into the number of CPUs in the process's affinity mask
// (sched_getaffinity(2)), which inside a cpuset cgroup is the cpuset's size.
//
// # The transcode
//
// The input clip is generated once with ffmpeg's testsrc2 source and cached
// ([Clip]), losslessly compressed so it stays small (about 20 MB for 5 s of
// 1080p) and cheap to decode; generation happens under a file lock and
// finishes with an atomic rename, so N concurrent jobs generate it once and
// never read a half-written file. [Transcode] then times only the encode:
// ffmpeg, libx264, CRF 22, preset medium, -threads N, output discarded
// (`-f null -`) unless a file is asked for.
//
// The package does not pin, limit or measure CPU placement: that is enforce's
// and measure's job around the child process.
package workload
