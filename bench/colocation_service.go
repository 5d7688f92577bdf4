package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func waitHTTP(ctx context.Context, addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("service at %s did not accept connections within 10 s", addr)
}

// writeNginxConf writes a single-process nginx serving a small static page
// on 127.0.0.1:port, everything under dir.
func writeNginxConf(dir string, port int) error {
	if err := os.MkdirAll(filepath.Join(dir, "html"), 0o755); err != nil {
		return err
	}
	page := strings.Repeat("corepin colocation test page\n", 20)
	if err := os.WriteFile(filepath.Join(dir, "html", "index.html"), []byte(page), 0o644); err != nil {
		return err
	}
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path %[1]s/tmp;
  proxy_temp_path %[1]s/tmp;
  fastcgi_temp_path %[1]s/tmp;
  uwsgi_temp_path %[1]s/tmp;
  scgi_temp_path %[1]s/tmp;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:%[2]d;
    root %[1]s/html;
  }
}
`, dir, port)
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644)
}
