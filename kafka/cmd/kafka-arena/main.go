// Command kafka-arena runs a Kafka feed as one feeder of the arena
// (../shared/arena): it starts an in-process Kafka cluster (kfake), produces
// a feed file into a topic keyed by document id, starts members of one
// group (retries-kafka processes), kills one of them with SIGKILL when
// told, and stops the others once the group has committed the whole
// topic. It prints when the group recovered from the kill.
//
//	kafka-arena -member BIN -url URL -docs FILE [-members 3] [-partitions 12] [-kill 10s]
//
// It is a measuring tool, not part of the library.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seed32e55400/retries/feed"
)

func main() {
	member := flag.String("member", "retries-kafka", "the member command")
	url := flag.String("url", "", "the document/v1 URL")
	docs := flag.String("docs", "", "the feed file, one operation a line")
	members := flag.Int("members", 3, "members of the group")
	partitions := flag.Int("partitions", 12, "partitions of the topic")
	kill := flag.Duration("kill", 0, "kill the first member with SIGKILL this long after the members start; 0: never")
	logDir := flag.String("logs", os.TempDir(), "where the members' stderr goes")
	flag.Parse()
	if err := run(*member, *url, *docs, *members, int32(*partitions), *kill, *logDir, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "kafka-arena:", err)
		os.Exit(1)
	}
}

func run(member, url, docs string, members int, partitions int32, kill time.Duration, logDir string, extra []string) error {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "ops", "dead"))
	if err != nil {
		return err
	}
	defer c.Close()
	addrs := strings.Join(c.ListenAddrs(), ",")
	n, err := produce(c.ListenAddrs(), docs)
	if err != nil {
		return err
	}
	start := time.Now()
	var cmds []*exec.Cmd
	for i := range members {
		args := append([]string{"-brokers", addrs, "-topic", "ops", "-group", "arena", "-url", url,
			"-failed-topic", "dead", "-progress", "0"}, extra...)
		cmd := exec.Command(member, args...)
		log, err := os.Create(fmt.Sprintf("%s/kafka-arena-member-%d.log", logDir, i))
		if err != nil {
			return err
		}
		defer log.Close()
		cmd.Stderr, cmd.Stdout = log, log
		if err := cmd.Start(); err != nil {
			return err
		}
		cmds = append(cmds, cmd)
	}
	ctx := context.Background()
	committed := func(g *kfake.GroupInfo) (sum int64) {
		if g == nil {
			return 0
		}
		for _, cm := range g.Commits["ops"] {
			sum += cm.Offset
		}
		return sum
	}
	if kill > 0 {
		if err := killOne(ctx, c, cmds, members, start, kill); err != nil {
			return err
		}
	}
	if _, err := c.WaitGroupInfo(ctx, "arena", func(g *kfake.GroupInfo) bool { return committed(g) >= n }); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "kafka-arena: all %d records committed after %.1fs\n", n, time.Since(start).Seconds())
	for _, cmd := range cmds {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, cmd := range cmds {
		if cmd.ProcessState == nil {
			_ = cmd.Wait()
		}
	}
	return nil
}

// killOne kills the first member at kill after start, and waits for the
// group to be stable without it and for one of its partitions to be
// committed further by its new owner, saying when each came.
func killOne(ctx context.Context, c *kfake.Cluster, cmds []*exec.Cmd, members int, start time.Time, kill time.Duration) error {
	time.Sleep(time.Until(start.Add(kill)))
	before := c.GroupInfo("arena")
	_ = cmds[0].Process.Kill()
	_ = cmds[0].Wait()
	killedAt := time.Now()
	g, err := c.WaitGroupStable(ctx, "arena", members-1)
	if err != nil {
		return err
	}
	stable := time.Since(killedAt)
	// The killed member's partitions: those no survivor had.
	had := map[int32]bool{}
	for _, m := range before.Members {
		for _, p := range m.Assignment["ops"] {
			had[p] = true
		}
	}
	for _, m := range g.Members {
		for _, mb := range before.Members {
			if mb.MemberID == m.MemberID {
				for _, p := range mb.Assignment["ops"] {
					delete(had, p)
				}
			}
		}
	}
	at := map[int32]int64{}
	for p := range had {
		at[p] = before.Commits["ops"][p].Offset
	}
	_, err = c.WaitGroupInfo(ctx, "arena", func(g *kfake.GroupInfo) bool {
		for p, o := range at {
			if cm, ok := g.Commits["ops"][p]; ok && cm.Offset > o {
				return true // fed again, by its new owner
			}
		}
		return false
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "kafka-arena: killed a member at %.1fs (partitions %v); the group was stable with %d members %.2fs later, and one of its partitions was committed further %.2fs after the kill\n",
		killedAt.Sub(start).Seconds(), keys(at), members-1, stable.Seconds(), time.Since(killedAt).Seconds())
	return nil
}

func keys(m map[int32]int64) []int32 {
	var ks []int32
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// produce produces the operations of the feed file at path to the ops
// topic, keyed by document id, and returns how many.
func produce(addrs []string, path string) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic("ops"), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	errs := make(chan error, 1)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		var id string
		for op, err := range feed.Read(strings.NewReader(string(line))) {
			if err == nil {
				id = op.ID
			}
		}
		n++
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(id), Value: line}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(context.Background()); err != nil {
		return 0, err
	}
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	return n, sc.Err()
}
