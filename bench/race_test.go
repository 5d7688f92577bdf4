//go:build race

package bench

// raceEnabled: the race detector runs the single-threaded statistics
// simulations many times slower; make test runs them once more without it.
const raceEnabled = true
