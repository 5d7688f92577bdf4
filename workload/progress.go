package workload

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// ErrNoProgress means ffmpeg's output held no complete progress report.
var ErrNoProgress = errors.New("no ffmpeg progress report")

// Progress is the last complete block of ffmpeg's `-progress` output: lines
// of key=value, each block ending in progress=continue or progress=end.
// See https://ffmpeg.org/ffmpeg.html#Advanced-options (-progress).
type Progress struct {
	Frame   int64         // frames written so far (frame=)
	FPS     float64       // ffmpeg's own running frames/s (fps=), 0 if absent
	OutTime time.Duration // position in the output (out_time_us=), 0 if N/A
	Speed   float64       // realtime multiple (speed=...x), 0 if N/A
	End     bool          // the block said progress=end: ffmpeg finished
	Blocks  int           // complete blocks seen
}

// maxProgressLine bounds one line of progress output; real lines are short.
const maxProgressLine = 64 << 10

// maxOutTimeUS is the largest out_time_us a time.Duration holds.
const maxOutTimeUS = int64(math.MaxInt64 / time.Microsecond)

// ParseProgress reads ffmpeg `-progress` output and returns its last
// complete block. Unknown keys, lines without '=' and "N/A" values are
// ignored, as are lines after the last progress= line (a block ffmpeg did
// not finish). A malformed frame, fps, out_time_us or speed is an error;
// so is output with no complete block ([ErrNoProgress]).
func ParseProgress(r io.Reader) (Progress, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxProgressLine)
	var done, cur Progress
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		key, val, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if val == "N/A" {
			continue
		}
		switch key {
		case "frame":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n < 0 {
				return done, fmt.Errorf("parsing progress frame=%q: want a count", val)
			}
			cur.Frame = n
		case "fps":
			f, err := parseNonNeg(val)
			if err != nil {
				return done, fmt.Errorf("parsing progress fps=%q: %w", val, err)
			}
			cur.FPS = f
		case "out_time_us":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return done, fmt.Errorf("parsing progress out_time_us=%q: %w", val, err)
			}
			// A Duration holds about 292 years; a longer position is not
			// ffmpeg's and would wrap negative.
			if n > maxOutTimeUS {
				return done, fmt.Errorf("parsing progress out_time_us=%q: more than %d microseconds", val, maxOutTimeUS)
			}
			// ffmpeg prints a negative time before the first frame.
			cur.OutTime = time.Duration(max(n, 0)) * time.Microsecond
		case "speed":
			f, err := parseNonNeg(strings.TrimSuffix(val, "x"))
			if err != nil {
				return done, fmt.Errorf("parsing progress speed=%q: %w", val, err)
			}
			cur.Speed = f
		case "progress":
			cur.End = val == "end"
			cur.Blocks = done.Blocks + 1
			done = cur
		}
	}
	if err := sc.Err(); err != nil {
		return done, fmt.Errorf("reading progress: %w", err)
	}
	if done.Blocks == 0 {
		return done, ErrNoProgress
	}
	return done, nil
}

func parseNonNeg(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, errors.New("want a number")
	}
	if f < 0 || f != f || f > 1e300 {
		return 0, errors.New("want a finite number >= 0")
	}
	return f, nil
}

// ParseStats returns the frame count of the last stats line ffmpeg wrote to
// stderr ("frame=  150 fps= 18 q=-1.0 Lsize=N/A time=..."; lines end in \r
// or \n). ok is false if there is none, as with -nostats.
func ParseStats(stderr []byte) (frames int64, ok bool) {
	for len(stderr) > 0 {
		i := bytes.LastIndexAny(stderr, "\r\n")
		line := bytes.TrimSpace(stderr[i+1:])
		stderr = stderr[:max(i, 0)]
		rest, found := bytes.CutPrefix(line, []byte("frame="))
		if !found {
			continue
		}
		rest = bytes.TrimLeft(rest, " ")
		end := 0
		for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
			end++
		}
		n, err := strconv.ParseInt(string(rest[:end]), 10, 64)
		if err != nil {
			continue
		}
		return n, true
	}
	return 0, false
}
