package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// nginx is a real nginx in front of the store: it admits rate requests a
// second after a burst (limit_req, nodelay) and answers 429 beyond, and
// reports a reset upstream as 502, as a proxy in front of Vespa would.
type nginx struct {
	bin, dir, conf string
	port           int
	cmd            *exec.Cmd
}

// nginxConf is the configuration: one worker, an access log of statuses,
// keep-alive connections to the store.
const nginxConf = `worker_processes 1;
error_log %[1]s/error.log warn;
pid %[1]s/nginx.pid;
events { worker_connections 4096; }
http {
	log_format status '$status';
	access_log %[1]s/access.log status;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	limit_req_zone $binary_remote_addr zone=feed:1m rate=%[2]dr/s;
	limit_req_status 429;
	upstream store { server 127.0.0.1:%[3]d; keepalive 64; }
	server {
		listen 127.0.0.1:%[4]d;
		keepalive_requests 1000000;
		location / {
			limit_req zone=feed burst=%[5]d nodelay;
			proxy_pass http://store;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_next_upstream off;
		}
	}
}
`

// startNginx starts nginx in dir before the store on storePort.
func startNginx(dir string, rate, burst, storePort int) (*nginx, error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx"} {
			if _, serr := os.Stat(p); serr == nil {
				bin, err = p, nil
			}
		}
		if err != nil {
			return nil, errors.New("nginx not found: install it (apt-get install nginx-light)")
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, dir, rate, storePort, port, burst), 0o644); err != nil {
		return nil, err
	}
	n := &nginx{bin: bin, dir: dir, conf: conf, port: port}
	if err := n.start(); err != nil {
		return nil, err
	}
	return n, nil
}

// start starts nginx on its port and waits until it listens.
func (n *nginx) start() error {
	n.cmd = exec.Command(n.bin, "-p", n.dir, "-c", n.conf, "-g", "daemon off;")
	n.cmd.Stderr = os.Stderr
	if err := n.cmd.Start(); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", n.addr())
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			n.stop()
			return fmt.Errorf("nginx did not listen within 10 s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (n *nginx) addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// stop stops nginx and waits for it; stopped already, it does nothing.
func (n *nginx) stop() {
	if n.cmd == nil || n.cmd.ProcessState != nil {
		return
	}
	_ = n.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = n.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = n.cmd.Process.Kill()
		<-done
	}
}

// statuses counts the requests of the access log by status.
func (n *nginx) statuses() (map[int]int, error) {
	f, err := os.Open(filepath.Join(n.dir, "access.log"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[int]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if code, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil {
			out[code]++
		}
	}
	return out, sc.Err()
}

// freePort returns a loopback port nobody listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
