//go:build !race

package extender

const raceEnabled = false
