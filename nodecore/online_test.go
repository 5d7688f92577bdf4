package nodecore

import (
	"testing"
	"testing/fstest"
)

func TestOnlineFrom(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
		err              bool
	}{
		{name: "list", data: "0-2,4-7\n", want: "0-2,4-7"},
		{name: "trailing NUL", data: "0-3\x00\n", want: "0-3"},
		{name: "garbage", data: "0-x\n", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := OnlineFrom(fstest.MapFS{onlinePath: {Data: []byte(tc.data)}})()
			if (err != nil) != tc.err {
				t.Fatalf("OnlineFrom() error = %v, want error %v", err, tc.err)
			}
			if err == nil && got.String() != tc.want {
				t.Errorf("OnlineFrom() = %s, want %s", got, tc.want)
			}
		})
	}
	if _, err := OnlineFrom(fstest.MapFS{})(); err == nil {
		t.Error("OnlineFrom() without the file: no error")
	}
}
