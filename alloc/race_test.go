//go:build race

package alloc

// raceEnabled shortens the property tests under the race detector, which
// runs them about twenty times slower.
const raceEnabled = true
