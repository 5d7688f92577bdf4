//go:build race

package extender

// raceEnabled: the race detector multiplies a process's memory, so peak
// memory is not measured under it.
const raceEnabled = true
