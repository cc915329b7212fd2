package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestReadArenaFeedFile(t *testing.T) {
	name := filepath.Join(t.TempDir(), "docs.jsonl")
	in := `{"put":"id:music:music::0","fields":{"title":"song 0"}}
{"put":"id:music:music::17","fields":{"title":"song 17","pad":"xx"}}
`
	if err := os.WriteFile(name, []byte(in), 0o600); err != nil {
		t.Fatal(err)
	}
	docs, err := read(name)
	if err != nil {
		t.Fatal(err)
	}
	want := []doc{
		{"/document/v1/music/music/docid/0", []byte(`{"fields":{"title":"song 0"}}`)},
		{"/document/v1/music/music/docid/17", []byte(`{"fields":{"title":"song 17","pad":"xx"}}`)},
	}
	if len(docs) != len(want) {
		t.Fatalf("read %d documents, want %d", len(docs), len(want))
	}
	for i := range want {
		if docs[i].path != want[i].path || string(docs[i].body) != string(want[i].body) {
			t.Errorf("document %d = %s %s, want %s %s", i, docs[i].path, docs[i].body, want[i].path, want[i].body)
		}
	}
}

func TestReadRejectsABadID(t *testing.T) {
	name := filepath.Join(t.TempDir(), "docs.jsonl")
	if err := os.WriteFile(name, []byte(`{"put":"music::0","fields":{}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := read(name); err == nil {
		t.Fatal("read accepted an id without its namespace and type")
	}
}

// TestPutSendsAgainAfter429 sends a document to a real server that answers
// 429 twice: put must send the same body three times and report it stored.
// The pause between sends is 0, so the test does not sleep.
func TestPutSendsAgainAfter429(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, r.URL.Path+" "+string(b))
		n := len(bodies)
		mu.Unlock()
		if n <= 2 {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	c := srv.Client()
	defer c.CloseIdleConnections()
	if !put(c, srv.URL, doc{"/document/v1/music/music/docid/3", []byte(`{"fields":{}}`)}, 0) {
		t.Fatal("put reported a failure")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 3 {
		t.Fatalf("the server saw %d requests, want 3", len(bodies))
	}
	for _, b := range bodies {
		if b != `/document/v1/music/music/docid/3 {"fields":{}}` {
			t.Errorf("request %q", b)
		}
	}
}
