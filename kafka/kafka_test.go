package kafka

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/feed/feedtest"
)

const (
	opsTopic  = "ops"
	deadTopic = "dead"
)

// newCluster starts an in-process Kafka cluster with the ops and dead
// topics, which allows session timeouts from 500 ms.
func newCluster(t *testing.T, partitions int32) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, opsTopic, deadTopic),
		kfake.GroupMinSessionTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// record is what a test produced.
type record struct {
	id        string // the document's key; "" for a malformed record
	kind      string // put, inc, bad (refused by the server), malformed
	partition int32
	offset    int64
}

// produce produces n records, keyed by document id: every 10th an
// increment, every 37th a put the server refuses, every 53rd not a valid
// operation, puts otherwise.
func produce(t *testing.T, addrs []string, n int) []record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(opsTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]record, n)
	var rs []*kgo.Record
	for i := range n {
		var id, kind, value string
		switch {
		case i%53 == 5:
			id, kind, value = fmt.Sprintf("m%d", i), "malformed", `{"put":"id:a:b::m","fields":{}} {"remove":"id:a:b::m"}`
		case i%37 == 3:
			id, kind, value = fmt.Sprintf("bad-%d", i), "bad", fmt.Sprintf(`{"put":"id:a:b::bad-%d","fields":{}}`, i)
		case i%10 == 0:
			id, kind, value = fmt.Sprintf("c%d", i), "inc", fmt.Sprintf(`{"update":"id:a:b::c%d","fields":{"n":{"increment":1}}}`, i)
		default:
			id, kind, value = fmt.Sprintf("p%d", i), "put", fmt.Sprintf(`{"put":"id:a:b::p%d","fields":{"i":%d}}`, i, i)
		}
		recs[i] = record{id: id, kind: kind}
		rs = append(rs, &kgo.Record{Key: []byte(id), Value: []byte(value)})
	}
	res := cl.ProduceSync(t.Context(), rs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	for i, r := range rs { // ProduceSync sets them (its results are not in this order)
		recs[i].partition, recs[i].offset = r.Partition, r.Offset
	}
	return recs
}

// fedCount returns how many of recs are to be fed (puts and increments);
// the others are to be dead-lettered.
func fedCount(recs []record) int {
	n := 0
	for _, r := range recs {
		if r.kind == "put" || r.kind == "inc" {
			n++
		}
	}
	return n
}

// vespa is a document/v1 server that refuses the bad-* documents, fails and
// throttles now and then, and counts what it applied and answered.
type vespa struct {
	*feedtest.Server
	mu       sync.Mutex
	answered map[string]int // documents answered 200
	want     int            // close all when this many distinct documents are answered
	all      chan struct{}
	hold     func(id string) bool // hold the request, unanswered, while it says so
	release  chan struct{}
}

func newVespa(t *testing.T, want int) *vespa {
	v := &vespa{answered: map[string]int{}, want: want, all: make(chan struct{}), release: make(chan struct{})}
	v.Server = feedtest.New(t, func(r *http.Request, n int) int {
		id := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		switch {
		case strings.HasPrefix(id, "bad-"):
			return http.StatusBadRequest
		case n%13 == 4:
			return http.StatusServiceUnavailable
		case n%17 == 6:
			return http.StatusTooManyRequests
		}
		v.mu.Lock()
		hold := v.hold != nil && v.hold(id)
		v.mu.Unlock()
		if hold {
			select {
			case <-v.release:
			case <-r.Context().Done():
				return feedtest.Reset
			}
		}
		v.mu.Lock()
		defer v.mu.Unlock()
		if v.answered[id]++; v.answered[id] == 1 && len(v.answered) == v.want {
			close(v.all)
		}
		return 0
	})
	return v
}

// testWait bounds each of a test's waits for the members, so that a member
// that stops feeding fails the test with what was missing, rather than
// hanging it until the binary's timeout.
const testWait = time.Minute

// await returns what ch yields (or its zero value once it is closed), or
// fails t after testWait with what() says is missing.
func await[T any](t *testing.T, ch <-chan T, what func() string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testWait):
		t.Fatalf("nothing after %v: %s", testWait, what())
		panic("unreachable")
	}
}

// missing says how many documents are answered, of those awaited.
func (v *vespa) missing() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return fmt.Sprintf("%d documents of %d answered", len(v.answered), v.want)
}

// lettersMissing says how many dead letters have come, of want.
func lettersMissing(got func() int, want int) func() string {
	return func() string { return fmt.Sprintf("%d dead letters of %d", got(), want) }
}

func (v *vespa) counts() map[string]int {
	v.mu.Lock()
	defer v.mu.Unlock()
	c := make(map[string]int, len(v.answered))
	for k, n := range v.answered {
		c[k] = n
	}
	return c
}

// startMember runs a member of group g against the cluster and v until the
// returned stop is called; stop returns its Report.
func startMember(t *testing.T, addrs []string, v *vespa, g string) (stop func() Report) {
	t.Helper()
	return runMember(t, Config{Brokers: addrs, Topic: opsTopic, Group: g, FailedTopic: deadTopic,
		SessionTimeout: stableSession, Feed: feed.Config{URL: v.URL, MaxOutage: -1}, Log: testLog{t}})
}

// stableSession is the session timeout of the members of tests that count
// what was fed or dead-lettered exactly: the library's default. With 1 s
// (heartbeats every 167 ms), a 2-core machine under -race and two busy
// processes starved a member's heartbeats past its session; the group
// then gave its partitions to a new generation, and at least once fed
// again what it had not committed ("fed 355, want 300"; a 5 MB record
// dead-lettered twice). Tests of a session lost set their own.
const stableSession = DefaultSessionTimeout

// runMember runs a member of cfg until stop, which returns its report.
func runMember(t *testing.T, cfg Config) (stop func() Report) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan Report, 1)
	go func() {
		res, err := Run(ctx, t.Context(), cfg)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	return func() Report {
		cancel()
		return <-done
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// deadLetters consumes the dead topic and sends each letter's key and
// reason on the returned channel.
func deadLetters(t *testing.T, addrs []string) <-chan [2]string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(deadTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ch := make(chan [2]string, 4096)
	go func() {
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				reason := ""
				for _, h := range r.Headers {
					if h.Key == ReasonHeader {
						reason = string(h.Value)
					}
				}
				ch <- [2]string{string(r.Key), reason}
			})
		}
	}()
	return ch
}

// committed returns the group's committed offsets and the topic's end
// offsets, by partition.
func committed(t *testing.T, addrs []string, g string) (commits, ends map[int32]int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	os, err := adm.FetchOffsets(t.Context(), g)
	if err != nil {
		t.Fatal(err)
	}
	es, err := adm.ListEndOffsets(t.Context(), opsTopic)
	if err != nil {
		t.Fatal(err)
	}
	commits, ends = map[int32]int64{}, map[int32]int64{}
	os.Each(func(o kadm.OffsetResponse) { commits[o.Partition] = o.At })
	es.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return commits, ends
}

// deadCount returns how many dead letters the dead topic holds.
func deadCount(t *testing.T, addrs []string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	es, err := kadm.NewClient(cl).ListEndOffsets(t.Context(), deadTopic)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(0)
	es.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// watchCommits calls check with each offset committed for the ops topic,
// before the cluster applies it.
func watchCommits(c *kfake.Cluster, check func(partition int32, offset int64)) {
	c.ControlKey(kmsg.OffsetCommit.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		for _, tp := range req.(*kmsg.OffsetCommitRequest).Topics {
			for _, p := range tp.Partitions {
				check(p.Partition, p.Offset)
			}
		}
		return nil, nil, false
	})
}

// checkFed asserts that every record was fed or dead-lettered: each put
// and increment answered (an increment exactly once), each refused and
// malformed record dead-lettered once with a reason, and the group's
// commits at the end of the topic.
func checkFed(t *testing.T, recs []record, v *vespa, letters map[string][]string, commits, ends map[int32]int64) {
	t.Helper()
	answered := v.counts()
	for _, r := range recs {
		switch r.kind {
		case "put":
			if answered[r.id] == 0 {
				t.Errorf("%s lost", r.id)
			}
		case "inc":
			if answered[r.id] != 1 {
				t.Errorf("%s applied %d times, want once", r.id, answered[r.id])
			}
		default:
			if l := letters[r.id]; len(l) != 1 || l[0] == "" {
				t.Errorf("%s (%s): dead letters %q, want one with a reason", r.id, r.kind, l)
			}
		}
	}
	for p, end := range ends {
		if commits[p] != end {
			t.Errorf("partition %d: committed %d, want its end %d", p, commits[p], end)
		}
	}
}

// TestMemberCommitsOnlyWhatIsDone: one member feeds a topic of 4
// partitions into a server that fails and throttles now and then, and holds
// the answer to one put until most of the rest is fed. No commit of that
// put's partition passes it while it is held; at the end every record is
// fed or dead-lettered and the commits are at the topic's end.
func TestMemberCommitsOnlyWhatIsDone(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 4)
	addrs := c.ListenAddrs()
	recs := produce(t, addrs, 600)
	good := fedCount(recs)
	v := newVespa(t, good)
	held := recs[1] // a put
	v.hold = func(id string) bool { return id == held.id }
	var mu sync.Mutex
	released := false
	watchCommits(c, func(p int32, offset int64) {
		mu.Lock()
		defer mu.Unlock()
		if p == held.partition && !released && offset > held.offset {
			t.Errorf("committed %d of partition %d while the put at %d was not answered", offset, p, held.offset)
		}
	})
	letters := deadLetters(t, addrs)
	stop := startMember(t, addrs, v, "g1")
	got := map[string][]string{}
	for range len(recs) - good { // every dead letter, while the put is held
		l := await(t, letters, lettersMissing(func() int { return len(got) }, len(recs)-good))
		got[l[0]] = append(got[l[0]], l[1])
	}
	mu.Lock()
	released = true
	mu.Unlock()
	close(v.release)
	await(t, v.all, v.missing)
	res := stop()
	commits, ends := committed(t, addrs, "g1")
	checkFed(t, recs, v, got, commits, ends)
	if res.Fed < int64(good) || res.DeadLettered != int64(len(recs)-good) || res.Commits == 0 {
		t.Errorf("Report = %+v, want %d fed, %d dead-lettered, some commits", res, good, len(recs)-good)
	}
}

// TestSecondMemberJoins: a second member joins while the first feeds; the
// partitions are spread over both, and nothing is lost.
func TestSecondMemberJoins(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 6)
	addrs := c.ListenAddrs()
	recs := produce(t, addrs, 3000)
	good := fedCount(recs)
	v := newVespa(t, good)
	// Hold the answers to a put of each partition until both members are
	// in the group, so that the first cannot finish alone.
	holdIDs := map[string]bool{}
	seen := map[int32]bool{}
	for _, r := range recs {
		if r.kind == "put" && !seen[r.partition] {
			seen[r.partition], holdIDs[r.id] = true, true
		}
	}
	v.hold = func(id string) bool { return holdIDs[id] }
	letters := deadLetters(t, addrs)
	stopA := startMember(t, addrs, v, "g2")
	if _, err := c.WaitGroupStable(t.Context(), "g2", 1); err != nil {
		t.Fatal(err)
	}
	stopB := startMember(t, addrs, v, "g2")
	if _, err := c.WaitGroupInfo(t.Context(), "g2", func(g *kfake.GroupInfo) bool { return g != nil && len(g.Members) == 2 }); err != nil {
		t.Fatal(err)
	}
	close(v.release) // the first's revoke may wait for a held put
	info, err := c.WaitGroupStable(t.Context(), "g2", 2)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for len(got) < len(recs)-good {
		l := await(t, letters, lettersMissing(func() int { return len(got) }, len(recs)-good))
		got[l[0]] = append(got[l[0]], l[1])
	}
	await(t, v.all, v.missing)
	a, b := stopA(), stopB()
	// A record done by the first member past one it had not finished is
	// done again by the second: at least once, so dead letters may repeat.
	again := 0
	for k, l := range got {
		again += len(l) - 1
		got[k] = l[:1]
	}
	commits, ends := committed(t, addrs, "g2")
	checkFed(t, recs, v, got, commits, ends)
	if a.Fed == 0 || b.Fed == 0 {
		t.Errorf("fed %d and %d: want both members to feed", a.Fed, b.Fed)
	}
	dups := 0
	for _, n := range v.counts() {
		dups += n - 1
	}
	t.Logf("assignment %v and %v; fed %d and %d, %d documents applied again, %d dead letters again",
		info.Members[0].Assignment, info.Members[1].Assignment, a.Fed, b.Fed, dups, again)
}

// signalLog is a testLog that closes on the first line holding what.
type signalLog struct {
	testLog
	what string
	once sync.Once
	seen chan struct{}
}

func (l *signalLog) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(l.what)) {
		l.once.Do(func() { close(l.seen) })
	}
	return l.testLog.Write(p)
}

// TestOutagePausesMember: while the server is away, the member's feed
// pauses: no record is dead-lettered and no commit passes a record not
// fed; once it is back, everything is fed, nothing lost.
func TestOutagePausesMember(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 4)
	addrs := c.ListenAddrs()
	recs := produce(t, addrs, 4000)
	good := fedCount(recs)
	v := newVespa(t, good)
	half := make(chan struct{})
	var once sync.Once
	v.hold = func(string) bool {
		if len(v.answered) >= good/4 {
			once.Do(func() { close(half) })
		}
		return false
	}
	var mu sync.Mutex
	down := false
	var commitsDown, heartbeats int
	beat := make(chan struct{}, 1024)
	watchCommits(c, func(p int32, offset int64) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			commitsDown++
		}
	})
	c.ControlKey(kmsg.Heartbeat.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		heartbeats++
		mu.Unlock()
		select {
		case beat <- struct{}{}:
		default:
		}
		return nil, nil, false
	})
	letters := deadLetters(t, addrs)
	log := &signalLog{testLog: testLog{t}, what: "paused:", seen: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan Report, 1)
	go func() {
		res, err := Run(ctx, t.Context(), Config{Brokers: addrs, Topic: opsTopic, Group: "g3", FailedTopic: deadTopic,
			SessionTimeout: time.Second, Feed: feed.Config{URL: v.URL, MaxOutage: -1}, Log: log})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-half
	v.Down()
	<-log.seen
	mu.Lock()
	down = true
	mu.Unlock()
	lettersAtPause := len(letters)
	for range 12 { // about 2 s of heartbeats: the member stays in the group, paused
		<-beat
	}
	mu.Lock()
	down = false
	mu.Unlock()
	if err := v.Up(); err != nil {
		t.Fatal(err)
	}
	duringOutage := len(letters) - lettersAtPause
	all := []([2]string){}
	for range duringOutage { // a record that failed while the feed was paused must not be a put or an increment
		l := await(t, letters, lettersMissing(func() int { return len(all) }, duringOutage))
		if !strings.HasPrefix(l[0], "bad-") && !strings.HasPrefix(l[0], "m") {
			t.Errorf("%s dead-lettered while the feed was paused: %s", l[0], l[1])
		}
		all = append(all, l)
	}
	// Done: the group's commits reach the topic's end (or the test fails,
	// rather than hang).
	wait, stop := context.WithTimeout(t.Context(), time.Minute)
	defer stop()
	if _, err := c.WaitGroupInfo(wait, "g3", func(g *kfake.GroupInfo) bool {
		sum := int64(0)
		for _, cm := range g.Commits[opsTopic] {
			sum += cm.Offset
		}
		return sum == int64(len(recs))
	}); err != nil {
		t.Fatalf("the group did not commit the topic's end a minute after the outage: %v", err)
	}
	cancel()
	res := await(t, done, func() string { return "the member did not stop" })
	n := int(deadCount(t, addrs))
	for len(all) < n {
		all = append(all, await(t, letters, lettersMissing(func() int { return len(all) }, n)))
	}
	got := map[string][]string{}
	for _, l := range all {
		got[l[0]] = append(got[l[0]], l[1])
	}
	// A put or an increment may spend its attempts on the outage before
	// the breaker opens (the feed's "slow feeds" case): it is then
	// dead-lettered, not lost.
	answered, early := v.counts(), 0
	for _, r := range recs {
		switch {
		case r.kind != "put" && r.kind != "inc":
			if len(got[r.id]) == 0 {
				t.Errorf("%s (%s) not dead-lettered", r.id, r.kind)
			}
		case answered[r.id] == 0 && len(got[r.id]) == 0:
			t.Errorf("%s lost", r.id)
		case answered[r.id] == 0:
			early++
		case r.kind == "inc" && answered[r.id] > 1:
			t.Errorf("%s applied %d times", r.id, answered[r.id])
		}
	}
	commits, ends := committed(t, addrs, "g3")
	for p, end := range ends {
		if commits[p] != end {
			t.Errorf("partition %d: committed %d, want its end %d", p, commits[p], end)
		}
	}
	t.Logf("%d commits while paused; %d puts and increments dead-lettered as the outage began; report %+v", commitsDown, early, res)
}

// TestKcatProducer: records that kcat (librdkafka, a client independent of
// franz-go) produces into the cluster are fed. It is skipped where kcat is
// not installed; .ci/run installs it.
func TestKcatProducer(t *testing.T) {
	t.Parallel()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat)")
	}
	c := newCluster(t, 3)
	addrs := c.ListenAddrs()
	var in strings.Builder
	const n = 300
	for i := range n {
		fmt.Fprintf(&in, "k%d|{\"put\":\"id:a:b::k%d\",\"fields\":{\"i\":%d}}\n", i, i, i)
	}
	cmd := exec.CommandContext(t.Context(), kcat, "-P", "-b", strings.Join(addrs, ","), "-t", opsTopic, "-K", "|")
	cmd.Stdin = strings.NewReader(in.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat: %v\n%s", err, out)
	}
	v := newVespa(t, n)
	stop := startMember(t, addrs, v, "g4")
	await(t, v.all, v.missing)
	res := stop()
	commits, ends := committed(t, addrs, "g4")
	for p, end := range ends {
		if commits[p] != end {
			t.Errorf("partition %d: committed %d, want its end %d", p, commits[p], end)
		}
	}
	if res.Fed != n {
		t.Errorf("fed %d, want %d", res.Fed, n)
	}
}

// holdingVespa returns a vespa for n records that holds every request,
// and a channel closed once two are held.
func holdingVespa(t *testing.T, n int) (*vespa, <-chan struct{}) {
	v := newVespa(t, n+1) // never all
	heldN := 0
	held := make(chan struct{})
	v.hold = func(string) bool { // v.mu held
		if heldN++; heldN == 2 {
			close(held)
		}
		return true
	}
	return v, held
}

// TestLagAtStop: a member stopped while most of the topic is not fed
// reports as its lag the records of its partitions not committed at the
// stop, as the group's commits and the partitions' ends count them (it
// was counted after leaving the group, which let every partition go, and
// was always 0).
func TestLagAtStop(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2)
	addrs := c.ListenAddrs()
	recs := produce(t, addrs, 1000)
	v, held := holdingVespa(t, len(recs))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan Report, 1)
	go func() {
		res, err := Run(ctx, t.Context(), Config{Brokers: addrs, Topic: opsTopic, Group: "lag", FailedTopic: deadTopic,
			SessionTimeout: time.Second, Feed: feed.Config{URL: v.URL, MaxOutage: -1}, Log: testLog{t}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	await(t, held, v.missing)
	cancel()         // no more records go to the feed
	close(v.release) // those held are answered, and the member stops
	res := await(t, done, v.missing)
	commits, ends := committed(t, addrs, "lag")
	want := int64(0)
	for p, end := range ends {
		want += end - commits[p]
	}
	if res.Lag != want || want == 0 {
		t.Errorf("Report.Lag = %d, want %d: the records not committed", res.Lag, want)
	}
}

// setMaxBytes sets max.message.bytes of topics.
func setMaxBytes(t *testing.T, addrs []string, n int, topics ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	v := strconv.Itoa(n)
	rs, err := kadm.NewClient(cl).AlterTopicConfigs(t.Context(), []kadm.AlterConfig{{Name: "max.message.bytes", Value: &v}}, topics...)
	if err == nil {
		for _, r := range rs {
			err = cmp.Or(err, r.Err)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// produceValues produces a record of each value to the ops topic's
// partition 0, keyed by keys[i] if given.
func produceValues(t *testing.T, addrs []string, values [][]byte, keys []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(opsTopic),
		kgo.ProducerBatchMaxBytes(16<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i, v := range values {
		r := &kgo.Record{Value: v, Partition: 0}
		if i < len(keys) {
			r.Key = []byte(keys[i])
		}
		if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLargeDeadLetter: a 5 MB record that is no operation, in a topic that
// allows 16 MB, is dead-lettered to a topic that allows as much (the
// producer's limit follows it, where it kept franz-go's 1 MB and the
// partition stopped committing at the record), and the partition is
// committed to its end.
func TestLargeDeadLetter(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	addrs := c.ListenAddrs()
	setMaxBytes(t, addrs, 16<<20, opsTopic, deadTopic)
	var values [][]byte
	for i := range 60 {
		v := []byte(fmt.Sprintf(`{"put":"id:a:b::p%d","fields":{}}`, i))
		if i == 36 {
			v = bytes.Repeat([]byte("x"), 5<<20)
		}
		values = append(values, v)
	}
	produceValues(t, addrs, values, nil)
	v := newVespa(t, 59)
	stop := startMember(t, addrs, v, "large")
	await(t, v.all, v.missing)
	want := int64(60)
	if _, err := c.WaitGroupInfo(t.Context(), "large", func(g *kfake.GroupInfo) bool { return commitOf(g, 0) == want }); err != nil {
		t.Fatal(err)
	}
	// Once: the member's session (stableSession) outlasts a loaded
	// machine's stalls, so it keeps its partition.
	if res := stop(); res.DeadLettered != 1 || res.Lag != 0 {
		t.Errorf("Report = %+v, want it dead-lettered and no lag", res)
	}
}

// TestDeadLetterCannotBeWritten: a dead letter larger than its topic allows
// is tried again, and then the member stops with ErrDeadLetter, the
// partition committed up to the record and not past it.
func TestDeadLetterCannotBeWritten(t *testing.T) {
	c := newCluster(t, 1)
	addrs := c.ListenAddrs()
	setMaxBytes(t, addrs, 16<<20, opsTopic)
	setMaxBytes(t, addrs, 4000, deadTopic)
	saved := letterWaits
	letterWaits = []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}
	t.Cleanup(func() { letterWaits = saved })
	var values [][]byte
	for i := range 20 {
		v := []byte(fmt.Sprintf(`{"put":"id:a:b::p%d","fields":{}}`, i))
		if i == 7 {
			v = bytes.Repeat([]byte("x"), 10000)
		}
		values = append(values, v)
	}
	produceValues(t, addrs, values, nil)
	v := newVespa(t, 19)
	var log bytes.Buffer
	var mu sync.Mutex
	res, err := Run(t.Context(), t.Context(), Config{Brokers: addrs, Topic: opsTopic, Group: "stuck", FailedTopic: deadTopic,
		SessionTimeout: time.Second, Feed: feed.Config{URL: v.URL, MaxOutage: -1}, Log: lockedWriter{&mu, &log}})
	if !errors.Is(err, ErrDeadLetter) {
		t.Fatalf("Run() = %v, want ErrDeadLetter; log:\n%s", err, log.String())
	}
	commits, _ := committed(t, addrs, "stuck")
	if commits[0] != 7 || res.Lag != 13 {
		t.Errorf("committed %d with a lag of %d, want 7 and 13 (up to the record)", commits[0], res.Lag)
	}
	if n := strings.Count(log.String(), "trying again"); n != 3 {
		t.Errorf("%d tries again, want 3; log:\n%s", n, log.String())
	}
}

// lockedWriter is a writer for a member's log and a test's reads.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestTombstones: a record with a null value is dead-lettered by default,
// its key and reason kept in the Failed file's line; with
// TombstonesRemove it removes the document its key names.
func TestTombstones(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mode   Tombstones
		remove bool
	}{{"dead letter", TombstonesDeadLetter, false}, {"remove", TombstonesRemove, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, 1)
			addrs := c.ListenAddrs()
			produceValues(t, addrs, [][]byte{[]byte(`{"put":"id:a:b::x","fields":{}}`), nil, []byte(`{"put":"id:a:b::y","fields":{}}`)},
				[]string{"id:a:b::x", "id:a:b::x", "id:a:b::y"})
			var removes atomic.Int64
			srv := feedtest.New(t, func(r *http.Request, _ int) int {
				if r.Method == http.MethodDelete && strings.HasSuffix(r.URL.Path, "/x") {
					removes.Add(1)
				}
				return 0
			})
			var failed bytes.Buffer
			var mu sync.Mutex
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan Report, 1)
			go func() {
				res, err := Run(ctx, t.Context(), Config{Brokers: addrs, Topic: opsTopic, Group: "t", Failed: lockedWriter{&mu, &failed},
					SessionTimeout: time.Second, Tombstones: tc.mode, Feed: feed.Config{URL: srv.URL}, Log: testLog{t}})
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			if _, err := c.WaitGroupInfo(t.Context(), "t", func(g *kfake.GroupInfo) bool { return commitOf(g, 0) == 3 }); err != nil {
				t.Fatal(err)
			}
			cancel()
			res := <-done
			mu.Lock()
			defer mu.Unlock()
			if tc.remove {
				if removes.Load() != 1 || res.DeadLettered != 0 || res.Fed != 3 {
					t.Errorf("%d removes, %+v; want the tombstone fed as a remove", removes.Load(), res)
				}
				return
			}
			var line struct {
				Key    string
				Value  json.RawMessage
				Reason string
			}
			if err := json.Unmarshal(failed.Bytes(), &line); err != nil || line.Key != "id:a:b::x" || string(line.Value) != "null" ||
				!strings.Contains(line.Reason, "tombstone") || removes.Load() != 0 || res.DeadLettered != 1 {
				t.Errorf("Failed holds %q (%v), %d removes; want the tombstone's key, a null value and why", failed.String(), err, removes.Load())
			}
		})
	}
}

// commitOf returns the offset the group committed for partition p of the
// ops topic, or -1.
func commitOf(g *kfake.GroupInfo, p int32) int64 {
	if g == nil { // the group is not there yet
		return -1
	}
	if cm, ok := g.Commits[opsTopic][p]; ok {
		return cm.Offset
	}
	return -1
}

// TestProgressJSON: with ProgressJSON, each progress report is a line of
// JSON with the counts and each partition's lag.
func TestProgressJSON(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2)
	addrs := c.ListenAddrs()
	recs := produce(t, addrs, 100)
	v := newVespa(t, fedCount(recs))
	var log bytes.Buffer
	var mu sync.Mutex
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan Report, 1)
	go func() {
		res, err := Run(ctx, t.Context(), Config{Brokers: addrs, Topic: opsTopic, Group: "p", FailedTopic: deadTopic, SessionTimeout: time.Second,
			Progress: time.Millisecond, ProgressJSON: true, Feed: feed.Config{URL: v.URL}, Log: lockedWriter{&mu, &log}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	await(t, v.all, v.missing)
	if _, err := c.WaitGroupInfo(t.Context(), "p", func(g *kfake.GroupInfo) bool { return commitOf(g, 0)+commitOf(g, 1) == 100 }); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	var last map[string]any
	for _, l := range strings.Split(log.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["kafka.lag.partitions"] != nil {
			last = m
		}
	}
	parts, _ := last["kafka.lag.partitions"].(map[string]any)
	if last == nil || len(parts) != 2 || last["kafka.fed"] == nil || last["kafka.commits"] == nil {
		t.Errorf("the last progress line %v, want the counts and two partitions' lag; log:\n%.2000s", last, log.String())
	}
}

// TestMemberStats reads a member's counts while it runs: with every request
// held, each partition's lag is its records past the commit and nothing
// is fed; once they are answered and the member has stopped, the counts
// are its Report's.
func TestMemberStats(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2)
	addrs := c.ListenAddrs()
	recs := produce(t, addrs, 300)
	v, held := holdingVespa(t, len(recs))
	mb, err := New(Config{Brokers: addrs, Topic: opsTopic, Group: "stats", FailedTopic: deadTopic,
		SessionTimeout: time.Second, Feed: feed.Config{URL: v.URL, MaxOutage: -1}, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan Report, 1)
	go func() {
		res, err := mb.Run(ctx, t.Context())
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	await(t, held, v.missing)
	before, ends := committed(t, addrs, "stats")
	s := mb.Stats()
	after, _ := committed(t, addrs, "stats")
	if s.Fed != 0 || len(s.Lag) != 2 {
		t.Errorf("Stats() while held = %+v, want nothing fed and the lag of 2 partitions", s)
	}
	// The lag is the records past the commit (only dead letters at the
	// start of a partition can be committed while every request is held).
	for p, end := range ends {
		if s.Lag[p] > end-max(before[p], 0) || s.Lag[p] < end-max(after[p], 0) {
			t.Errorf("partition %d: lag %d, want its %d records less the %d to %d committed", p, s.Lag[p], end, before[p], after[p])
		}
	}
	if mb.Feed().Stats().InFlight == 0 {
		t.Errorf("Feed().Stats() = %+v: want the held requests in flight", mb.Feed().Stats())
	}
	cancel()
	close(v.release)
	res := await(t, done, v.missing)
	s = mb.Stats()
	if s.Fed != res.Fed || s.Commits != res.Commits || s.DeadLettered != res.DeadLettered || s.Fed == 0 {
		t.Errorf("Stats() after Run = %+v, want the counts of its Report %+v", s, res)
	}
	if _, err := mb.Run(t.Context(), t.Context()); err == nil {
		t.Error("a second Run did not fail")
	}
}

// TestDeadLetterBrokerLimit: a broker that allows 16 MB records and
// describes a topic with no override of its own by the 1 MB default (as
// kfake does) takes a 5 MB dead letter: the producer's limit is the larger
// of the two, where it took the topic's alone and the member stopped with
// ErrDeadLetter, refusing a record the broker would take.
func TestDeadLetterBrokerLimit(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, opsTopic, deadTopic),
		kfake.GroupMinSessionTimeout(500*time.Millisecond), kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(16 << 20)}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addrs := c.ListenAddrs()
	values := [][]byte{[]byte(`{"put":"id:a:b::p0","fields":{}}`), bytes.Repeat([]byte("x"), 5<<20), []byte(`{"put":"id:a:b::p2","fields":{}}`)}
	produceValues(t, addrs, values, nil)
	v := newVespa(t, 2)
	stop := startMember(t, addrs, v, "broker-limit")
	await(t, v.all, v.missing)
	if _, err := c.WaitGroupInfo(t.Context(), "broker-limit", func(g *kfake.GroupInfo) bool { return commitOf(g, 0) == 3 }); err != nil {
		t.Fatal(err)
	}
	if res := stop(); res.DeadLettered != 1 {
		t.Errorf("Report = %+v, want the large record dead-lettered", res)
	}
}

// TestRevokeDuringOutage: a member whose records wait in the feed for an
// endpoint that is down (its Feed.Timeout an hour) lets its partitions go
// at once when a second member joins: the records not on the wire end,
// kept for the next owner, and the group settles with both members while
// the endpoint is still down. Once it is back, every record is fed or
// dead-lettered, no increment twice, and the group commits the topic's end.
func TestRevokeDuringOutage(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 6)
	addrs := c.ListenAddrs()
	recs := produce(t, addrs, 2000)
	v := newVespa(t, fedCount(recs))
	v.Down()
	letters := deadLetters(t, addrs)
	log := &signalLog{testLog: testLog{t}, what: "paused:", seen: make(chan struct{})}
	stopA := runMember(t, Config{Brokers: addrs, Topic: opsTopic, Group: "g9", FailedTopic: deadTopic,
		SessionTimeout: time.Second, Feed: feed.Config{URL: v.URL, MaxOutage: -1, Timeout: time.Hour}, Log: log})
	<-log.seen // its records wait for the endpoint
	stopB := startMember(t, addrs, v, "g9")
	// A guard, not a measure: the rebalance takes about a second; a revoke
	// that waited for the records would hold it for the hour.
	wait, stop := context.WithTimeout(t.Context(), 45*time.Second)
	defer stop()
	info, err := c.WaitGroupInfo(wait, "g9", func(g *kfake.GroupInfo) bool {
		if g == nil || g.State != "Stable" || len(g.Members) != 2 {
			return false
		}
		for _, m := range g.Members {
			if len(m.Assignment[opsTopic]) == 0 {
				return false // the first of the cooperative rebalance's two rounds
			}
		}
		return true
	})
	if err != nil {
		t.Fatalf("the second member got no partition while the endpoint was down: %v", err)
	}
	if err := v.Up(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitGroupInfo(t.Context(), "g9", func(g *kfake.GroupInfo) bool {
		sum := int64(0)
		for _, cm := range g.Commits[opsTopic] {
			sum += cm.Offset
		}
		return sum == int64(len(recs))
	}); err != nil {
		t.Fatal(err)
	}
	a, b := stopA(), stopB()
	n := int(deadCount(t, addrs))
	got := map[string][]string{}
	for k := 0; k < n; k++ {
		l := await(t, letters, lettersMissing(func() int { return k }, n))
		got[l[0]] = append(got[l[0]], l[1])
	}
	answered := v.counts()
	for _, r := range recs {
		switch {
		case r.kind != "put" && r.kind != "inc":
		case answered[r.id] == 0 && len(got[r.id]) == 0:
			t.Errorf("%s lost", r.id)
		case r.kind == "inc" && answered[r.id] > 1:
			t.Errorf("%s applied %d times", r.id, answered[r.id])
		}
	}
	t.Logf("fed %d and %d; assignment %v and %v", a.Fed, b.Fed, info.Members[0].Assignment, info.Members[1].Assignment)
}
