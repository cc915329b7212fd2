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
	"syscall"
	"time"
)

// nginx is a real nginx in front of the store: it admits rate requests a
// second after a burst (limit_req, nodelay) and answers 429 beyond, and
// reports a reset upstream as 502, as a proxy in front of Vespa would.
type nginx struct {
	bin, dir, conf string
	storePort      int
	burst          int
	listens        []listen
	cmd            *exec.Cmd
}

// listen is one port of nginx; h2 speaks HTTP/2 without TLS.
type listen struct {
	port int
	h2   bool
}

// nginxConf is the configuration: one worker, an access log of methods and
// statuses, keep-alive connections to the store; the server blocks follow.
const nginxConf = `worker_processes 1;
error_log %[1]s/error.log warn;
pid %[1]s/nginx.pid;
events { worker_connections 8192; }
http {
	log_format status '$request_method $status';
	access_log %[1]s/access.log status;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	limit_req_zone $binary_remote_addr zone=feed:1m rate=%[2]dr/s;
	limit_req_status 429;
	upstream store { server 127.0.0.1:%[3]d; keepalive 64; }
%[4]s}
`

// serverConf is one server block.
const serverConf = `	server {
		listen 127.0.0.1:%[1]d%[2]s;
		keepalive_requests 1000000;
		location / {
			limit_req zone=feed burst=%[3]d nodelay;
			proxy_pass http://store;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_next_upstream off;
			proxy_buffering off;
			proxy_read_timeout 600s;
		}
	}
`

// startNginx starts nginx in dir before the store on storePort, on a free
// port for each of listens.
func startNginx(dir string, rate, burst, storePort int, listens []listen) (*nginx, error) {
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
	n := &nginx{bin: bin, dir: dir, conf: filepath.Join(dir, "nginx.conf"), storePort: storePort, burst: burst}
	for _, l := range listens {
		if l.port, err = freePort(); err != nil {
			return nil, err
		}
		n.listens = append(n.listens, l)
	}
	if err := n.configure(rate); err != nil {
		return nil, err
	}
	if err := n.start(); err != nil {
		return nil, err
	}
	return n, nil
}

// configure writes the configuration with the rate given.
func (n *nginx) configure(rate int) error {
	var servers strings.Builder
	for _, l := range n.listens {
		h2 := ""
		if l.h2 {
			h2 = " http2"
		}
		fmt.Fprintf(&servers, serverConf, l.port, h2, n.burst)
	}
	return os.WriteFile(n.conf, fmt.Appendf(nil, nginxConf, n.dir, rate, n.storePort, servers.String()), 0o644)
}

// start starts nginx on its ports and waits until the first listens.
func (n *nginx) start() error {
	n.cmd = exec.Command(n.bin, "-p", n.dir, "-c", n.conf, "-g", "daemon off;")
	n.cmd.Stderr = os.Stderr
	if err := n.cmd.Start(); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", n.addr(0))
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

func (n *nginx) addr(i int) string { return "127.0.0.1:" + strconv.Itoa(n.listens[i].port) }

// url is the URL of nginx's i-th port.
func (n *nginx) url(i int) string { return "http://" + n.addr(i) }

// follow sets nginx's rate to each phase's share of rate as its time
// comes, by a reload, and returns the function that stops following.
func (n *nginx) follow(phases []phase, rate int) (stop func()) {
	var timers []*time.Timer
	for _, p := range phases {
		timers = append(timers, time.AfterFunc(p.at, func() {
			if n.configure(max(1, int(float64(rate)*p.f+0.5))) == nil && n.cmd != nil && n.cmd.ProcessState == nil {
				_ = n.cmd.Process.Signal(syscall.SIGHUP)
			}
		}))
	}
	return func() {
		for _, t := range timers {
			t.Stop()
		}
	}
}

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

// statuses counts the requests of the access log by method and status.
func (n *nginx) statuses() (map[string]map[int]int, error) {
	f, err := os.Open(filepath.Join(n.dir, "access.log"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]map[int]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		method, status, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if code, err := strconv.Atoi(status); err == nil {
			if out[method] == nil {
				out[method] = map[int]int{}
			}
			out[method][code]++
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
