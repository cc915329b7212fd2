package kafka_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/feed/feedtest"
	"github.com/seed32e55400/retries/kafka"
)

// letters is a dead-letter file that says when it has n lines.
type letters struct {
	mu   sync.Mutex
	b    strings.Builder
	n    int
	full chan struct{}
}

func (l *letters) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	if l.n--; l.n == 0 {
		close(l.full)
	}
	return len(p), nil
}

// Run makes this process a member of a consumer group that feeds Vespa.
// Here an in-process Kafka cluster holds three operations and a record
// that is not one, and a loopback server plays Vespa: the operations are
// fed, the other record is dead-lettered, and Run returns once its context
// ends, having committed all four.
func ExampleRun() {
	cluster, err := kfake.NewCluster(kfake.SeedTopics(1, "docs"))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("docs"))
	if err != nil {
		panic(err)
	}
	for _, v := range []string{
		`{"put":"id:music:music::1","fields":{"title":"Yellow"}}`,
		`{"update":"id:music:music::1","fields":{"plays":{"increment":1}}}`,
		`not an operation`,
		`{"remove":"id:music:music::2"}`,
	} {
		if err := producer.ProduceSync(context.Background(), &kgo.Record{Key: []byte("id:music:music::1"), Value: []byte(v)}).FirstErr(); err != nil {
			panic(err)
		}
	}
	producer.Close()

	fed := make(chan struct{}, 3)
	vespa := feedtest.NewServer(func(*http.Request, int) int { fed <- struct{}{}; return 0 })
	defer vespa.Close()
	dead := &letters{n: 1, full: make(chan struct{})}

	ctx, stop := context.WithCancel(context.Background())
	go func() {
		for range 3 {
			<-fed
		}
		<-dead.full
		stop() // stop fetching, finish, commit, leave the group
	}()
	res, err := kafka.Run(ctx, context.Background(), kafka.Config{
		Brokers: cluster.ListenAddrs(), Topic: "docs", Group: "vespa-feed", Failed: dead,
		Feed: feed.Config{URL: vespa.URL},
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("fed %d, dead-lettered %d: %s", res.Fed, res.DeadLettered, dead.b.String())
	fmt.Println("lag", res.Lag)
	// Output:
	// fed 3, dead-lettered 1: {"topic":"docs","partition":0,"offset":2,"key":"id:music:music::1","value":"not an operation","reason":"not a valid operation: line 1: invalid JSON: 'n' where an operation (a JSON object) should start; the input from line 1 on was not read"}
	// lag 0
}
