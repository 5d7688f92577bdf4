package measure

import (
	"errors"
	"os"
	"testing"
	"testing/fstest"
	"time"
)

func TestRunDelay(t *testing.T) {
	tests := []struct {
		name    string
		fsys    fstest.MapFS
		want    time.Duration
		wantErr bool
	}{
		{name: "two threads summed", fsys: fstest.MapFS{
			"7/task/7/schedstat": {Data: []byte("100 2000 3\n")},
			"7/task/8/schedstat": {Data: []byte("100 500 3\n")},
		}, want: 2500},
		{name: "thread gone between list and read", fsys: fstest.MapFS{
			"7/task/7/schedstat": {Data: []byte("1 40 1\n")},
			"7/task/9/stat":      {Data: []byte("x")},
		}, want: 40},
		{name: "garbage", fsys: fstest.MapFS{"7/task/7/schedstat": {Data: []byte("1 two 3\n")}}, wantErr: true},
		{name: "no such process", fsys: fstest.MapFS{}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RunDelay(tc.fsys, 7)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("RunDelay() = %v, %v; want %v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestRunDelaySelf(t *testing.T) {
	_, err := RunDelay(os.DirFS("/proc"), os.Getpid())
	if errors.Is(err, ErrNotSupported) {
		t.Skip("kernel without CONFIG_SCHED_INFO")
	}
	if err != nil {
		t.Fatalf("RunDelay(self) error: %v", err)
	}
}
