// Package netbench holds the kernels of corepin's oversubscription
// experiment: a TCP ping-pong (a client and an echo server exchanging small
// messages in lockstep, the communication pattern of tightly coupled HPC
// ranks), a fixed-work integer compute kernel (its compute-only
// counterpart), and a pair of network namespaces joined by a veth pair (the
// network path between two containers on one host).
//
// Every kernel does fixed work (N round trips, N ops) and reports how long
// it took, so the same work can be compared at 1 to 4 processes per CPU.
// RunRank runs one rank process (`corepin pingpong ...`, whose command
// line cmd/corepin/cli parses with cobra); the experiment launches one per
// rank, started together by a Barrier, and reads their lines (Listening,
// Ready, RankResult).
//
// NewVethPair needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and the ip
// command of iproute2 (ip-netns(8), veth(4)); it addresses only the two
// namespaces it creates, from the benchmarking range 198.18.0.0/15 of
// RFC 2544 (https://www.rfc-editor.org/rfc/rfc2544#appendix-C.2.2), so the
// traffic never leaves them. Without root or ip it returns an error
// wrapping ErrUnsupported.
package netbench
