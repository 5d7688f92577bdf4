// Package loadgen drives HTTP load at latency-sensitive services and
// measures what their users would see: p50, p90, p99, p99.9 and maximum
// latency, the achieved request rate and errors. It also provides the
// service side of corepin's colocation experiments: CPUService, an HTTP
// server whose every request costs a fixed amount of CPU time.
//
// # Open loop, and why latency counts from the intended send time
//
// A closed-loop generator such as wrk keeps N connections, and each
// connection sends its next request only after the previous response has
// arrived. When the service stalls for 50 ms, every connection waits with
// it: the requests that real users would have sent during the stall are
// never sent, so they are never measured. The one slow response is
// recorded, the dozens of users who would have queued behind it are not,
// and the reported p99 can be orders of magnitude better than what users
// experience. Gil Tene named this coordinated omission: the load generator
// coordinates with the system under test and omits exactly the
// measurements that matter (talk "How NOT to Measure Latency",
// https://www.infoq.com/presentations/latency-response-time/; the wrk2 README,
// https://github.com/giltene/wrk2).
//
// OpenLoop avoids it. It sends at a constant rate R: request i is due at
// t0 + i/R, independent of how earlier requests fared. Its latency is
// measured from that intended send time, not from when it actually left,
// so time spent waiting behind a stall (in the client, for a free
// connection, or in the server's queue) counts, as it would for a user.
// Latencies go into an HdrHistogram (github.com/HdrHistogram/hdrhistogram-go,
// three significant digits, 1 µs to 10 min), from which Result takes its
// percentiles and a compact CDF.
//
// The generator itself can fall behind, on a small or busy machine most of
// all. It does not spin a CPU to keep time: a timer wakes it when the next
// request is due, and the request goes to an idle worker or, when all are
// busy, to a fresh goroutine. Sends that leave more than LateThreshold after
// their intended time still count from the intended time, and
// Result.LateSends says how many there were, so a user can tell that the
// generator, not the service, was the bottleneck. Run it on CPUs apart from
// the service and its neighbours where the machine allows.
//
// Wrk drives the real wrk binary (Debian package wrk 4.1) for comparison
// with published numbers. It is closed-loop and has no constant-rate mode
// (that is wrk2's -R, which Debian does not package), so its Result has
// ClosedLoop set and TargetRPS zero; a Lua script adds wrk's p99.9 and a CDF
// to its text report.
//
// # Service
//
// CPUService burns its cost on the request's own OS thread until that
// thread's CPU clock (clock_gettime(2) with CLOCK_THREAD_CPUTIME_ID) has
// advanced by the cost, so a request costs the same CPU however long the
// scheduler keeps it waiting, and a batch beside it shows up as wall-clock
// latency, the quantity under study. `corepin serve cpu` runs it as a
// process and prints its address as the first line of stdout.
//
// StartService starts such a service as a child process through proc (in
// an enforce group when its spec names a driver: pinning, weight and idle
// come from enforce.Resources), reads the announced address, and stops it
// with SIGTERM, then SIGKILL, removing its group.
//
// What this package does not do: pin itself or the service to CPUs (a
// bench places `corepin serve cpu` and `corepin load -o json` as child
// processes with the enforce package, and reads the load's Result back with
// json.Unmarshal), send anything but GET, or speak HTTP/2.
package loadgen
