//go:build ignore

// slow-clients measures what slow and idle clients can pin of a real
// `rewind serve` (issue 24, finding 5): the node's resident memory (RSS,
// and its peak) before and while 8 clients hold 60 MB bodies half-sent,
// after 8 chunked 100 MB posts, and the connections and descriptors 1,100
// idle connections take. docs/benchmarks.md, "Slow and idle clients".
//
//	go build -o /tmp/rewind ./cmd/rewind
//	go run docs/slow-clients.go -rewind /tmp/rewind [-auth] [-nofile 1024]
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	bin := flag.String("rewind", "rewind", "the rewind binary")
	auth := flag.Bool("auth", false, "serve with --auth (the clients send no token)")
	hold := flag.Duration("hold", 5*time.Second, "how long the slow clients hold their bodies")
	nofile := flag.Int("nofile", 1024, "the node's open-file limit (as the pentest's), set with prlimit; 0: inherited")
	flag.Parse()
	dir, _ := os.MkdirTemp("", "slow-clients-")
	defer os.RemoveAll(dir)
	addr := "127.0.0.1:17171"
	args := []string{"serve", "--listen", addr, "--data", filepath.Join(dir, "d"), "--log-level", "error"}
	if *auth {
		args = append(args, "--auth")
	}
	cmd := exec.Command(*bin, args...)
	if *nofile > 0 {
		cmd = exec.Command("prlimit", append([]string{fmt.Sprintf("--nofile=%d:%d", *nofile, *nofile), *bin}, args...)...)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if i > 300 {
			panic("the node did not start")
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	fmt.Printf("start: rss %s\n", mib(rss(pid, "VmRSS")))

	// 8 slow bodies: 60 MB announced, 55 MiB (57.7 MB) sent, then held.
	var conns []net.Conn
	chunk := bytes.Repeat([]byte{0x0a}, 1<<20)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			fmt.Fprintf(c, "POST /rewind.v1.PublishService/Publish HTTP/1.1\r\nHost: %s\r\nContent-Type: application/proto\r\nContent-Length: 60000000\r\n\r\n", addr)
			for range 55 {
				c.SetWriteDeadline(time.Now().Add(2 * time.Second))
				if _, err := c.Write(chunk); err != nil {
					return // refused or closed by the server
				}
			}
		}()
	}
	wg.Wait()
	time.Sleep(*hold)
	fmt.Printf("8 slow 60 MB bodies, held %v: rss %s (peak %s)\n", *hold, mib(rss(pid, "VmRSS")), mib(rss(pid, "VmHWM")))
	metrics(addr)
	for _, c := range conns {
		c.Close()
	}
	time.Sleep(2 * time.Second)
	fmt.Printf("  after they left: rss %s\n", mib(rss(pid, "VmRSS")))

	// 8 chunked 100 MB posts at full speed.
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "POST /rewind.v1.PublishService/Publish HTTP/1.1\r\nHost: %s\r\nContent-Type: application/proto\r\nTransfer-Encoding: chunked\r\n\r\n", addr)
			hdr := []byte(strconv.FormatInt(int64(len(chunk)), 16) + "\r\n")
			for range 100 {
				c.SetWriteDeadline(time.Now().Add(5 * time.Second))
				if _, err := c.Write(append(append(hdr, chunk...), '\r', '\n')); err != nil {
					return
				}
			}
			c.Write([]byte("0\r\n\r\n"))
			io.Copy(io.Discard, io.LimitReader(c, 1<<16))
		}()
	}
	wg.Wait()
	fmt.Printf("8 chunked 100 MB posts: rss %s (peak %s)\n", mib(rss(pid, "VmRSS")), mib(rss(pid, "VmHWM")))
	metrics(addr)
	time.Sleep(5 * time.Second)
	fmt.Printf("  5 s later: rss %s\n", mib(rss(pid, "VmRSS")))

	// 1,100 idle keep-alive connections, each after one request.
	served := 0
	var idle []net.Conn
	for range 1100 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		idle = append(idle, c)
		fmt.Fprintf(c, "GET /livez HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if line, err := bufio.NewReader(c).ReadString('\n'); err == nil && strings.HasPrefix(line, "HTTP/1.1 200") {
			served++
		}
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	fmt.Printf("1,100 idle connections: %d served, node holds %d descriptors, rss %s\n", served, len(fds), mib(rss(pid, "VmRSS")))
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	c, err := d.Dial("tcp", addr)
	ok := false
	if err == nil {
		fmt.Fprintf(c, "GET /livez HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		ok = err == nil && strings.HasPrefix(line, "HTTP/1.1 200")
		c.Close()
	}
	fmt.Printf("  a client from another address (127.0.0.2) is served: %v\n", ok)
	for _, c := range idle {
		c.Close()
	}
}

// metrics prints the node's rewind_http_* metrics (with --auth: none,
// /metrics needs a token).
func metrics(addr string) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(c)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "rewind_http_") {
			fmt.Println("  " + l)
		}
	}
}

// rss reads a VmRSS/VmHWM line of /proc/PID/status, in bytes.
func rss(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field+":") {
			f := strings.Fields(l)
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	return -1
}

func mib(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }
